"""A lane hands the build's AOT kernels artifact to the engine it installs: found next to the wheel,
copied to the host with its digest checked, named to the engine by ENGINE_KERNELS_ARTIFACT."""
from gates.install import ENV_KERNELS, Installed, kernels_beside, put_kernels
from hosts.local import LocalHost
from releases.canonical import file_sha256


def test_the_kernels_artifact_beside_the_wheel_reaches_the_engine(tmp_path):
    wheel = tmp_path / "assay_engine-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"wheel")
    assert kernels_beside(wheel) is None                       # a build without kernels: JIT
    kernels = tmp_path / "assay_engine-0.1.0-kernels.tar"
    kernels.write_bytes(b"kernels")
    assert kernels_beside(wheel) == kernels
    workdir = tmp_path / "lane"
    workdir.mkdir()
    remote, sha = put_kernels(LocalHost(), kernels, str(workdir))
    assert sha == file_sha256(kernels) == file_sha256(remote)
    installed = Installed(python="py", venv=str(workdir / "venv"), wheel_sha256="x", kernels=remote)
    assert installed.env[ENV_KERNELS] == remote
    assert ENV_KERNELS not in Installed(python="py", venv="v", wheel_sha256="x").env
