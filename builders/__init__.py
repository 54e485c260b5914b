"""Builders: freeze a source, build it twice hermetically, explain differences, describe it.

    snapshot.freeze / export_source / as_ref   candidate record and its exact source tree
    environment.hermetic_env                   fixed and varied build environment
    variations.plan_for / probe / wrap         what differs between a and b, made real on the host
    recipe.build / build_twice -> BuildResult  wheel + sdist on a Host, SLSA v1 provenance
    compare.compare                            reproducibility record, every difference named
    bisect.bisect                              each difference attributed to one variation
    reproduce.reproduce / explain              build twice, compare, bisect, diffoscope evidence
    sbom.write_sboms                           SPDX 2.3 and CycloneDX 1.5 JSON
    drift.check_drift                          nightly: rebuilt vs published bytes

No Prefect here; imports only hosts/ and releases/.
"""
