"""What differs between build a and build b (reprotest's set), and how each difference is made real.

A plan maps every variation to the side whose value a build gets: build a is all "a", build b is
all "b", and a bisection trial is all "a" but one "b". Each variation is made real on the build
host, not only named in a variable:

  build_path  the build directory (caller's choice: b is deeper and longer)
  hostname    a UTS namespace whose hostname is set (`unshare --uts`, needs root on the host);
              HOSTNAME follows it
  user        USER / LOGNAME, and the uid in a user namespace (`unshare --user --map-user`):
              the build sees uid 4242 and owns its files as 4242; the real uid stays the host's
  umask       022 vs 002
  tz          TZ=UTC vs TZ=Etc/GMT-14 (UTC+14: another calendar day for half of every day)
  locale      LANG/LC_ALL C.UTF-8 vs fr_CH.UTF-8
  time        the clock: the host's vs 397 days ahead (libfaketime's `faketime -f +397d`);
              SOURCE_DATE_EPOCH stays the commit's, so only a build that reads the clock differs
  home_dir    HOME inside the build directory: `home` vs `elsewhere/home-b`
  env_noise   variables of different names, values and lengths that no build should read
  fs_order    directory listing order: b's source is read through a disorderfs (FUSE) mount that
              shuffles every directory's entries; needs disorderfs and /dev/fuse on the host

A variation whose tool is missing or refused on the host (probe) is not varied, and the record
says why, never pretending it was.
"""
from __future__ import annotations

import hashlib
import shlex
from typing import Mapping

from hosts.base import Host

# Names become JSON-pointer segments in the release notes (/variations/NAME/value): none may read
# as a private marker there ("home" would: /home/value looks like a home directory).
NAMES = ("build_path", "hostname", "user", "umask", "tz", "locale", "time", "home_dir", "env_noise", "fs_order")
SIDES = ("a", "b")
UID_B = 4242
CLOCK_OFFSET_DAYS = 397
HOSTNAMES = {"a": "assay-build-a", "b": "assay-build-b-varied"}
USERS = {"a": "assay-builder-a", "b": "assay-builder-b"}
UMASKS = {"a": "022", "b": "002"}
TZS = {"a": "UTC", "b": "Etc/GMT-14"}
LOCALES = {"a": "C.UTF-8", "b": "fr_CH.UTF-8"}
HOMES = {"a": "home", "b": "elsewhere/home-b"}  # relative to the build directory
Plan = Mapping[str, str]  # variation name -> "a" | "b"


class VariationError(ValueError):
    """A variation list names something that is not a variation."""


def plan_for(side: str, enabled: tuple[str, ...] = NAMES) -> dict[str, str]:
    """Every enabled variation on SIDE, the rest on "a" (a disabled variation never differs)."""
    return {n: (side if n in enabled else "a") for n in NAMES}


def trial_plan(name: str) -> dict[str, str]:
    """All on "a" but NAME: one bisection trial."""
    return {n: ("b" if n == name else "a") for n in NAMES}


def parse_names(text: str | None) -> tuple[str, ...]:
    """`--variations umask,tz` -> ("umask", "tz"); None or "all" -> every variation."""
    if text is None or text.strip() == "all":
        return NAMES
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in NAMES]
    if unknown or not names:
        raise VariationError(f"--variations: unknown variation(s) {', '.join(unknown) or '(none given)'}; "
                             f"choose from {', '.join(NAMES)} or 'all'")
    return names


def probe(host: Host, python: str) -> dict[str, str]:
    """name -> why it cannot be varied on HOST; variations not named here can be."""
    missing: dict[str, str] = {}
    uts = host.run(["unshare", "--uts", "sh", "-c", f"hostname {HOSTNAMES['b']} && hostname"], timeout=30)
    if uts.exit_code != 0 or uts.stdout.strip() != HOSTNAMES["b"]:
        missing["hostname"] = f"`unshare --uts` + `hostname` refused on {host.name}: {_why(uts)}"
    ns = host.run(["unshare", "--user", f"--map-user={UID_B}", f"--map-group={UID_B}", python, "-c",
                   "import os; print(os.getuid())"], timeout=30)
    if ns.exit_code != 0 or ns.stdout.strip() != str(UID_B):
        missing["user"] = f"a user namespace with uid {UID_B} refused on {host.name}: {_why(ns)}"
    clock = host.run(["faketime", "-f", f"+{CLOCK_OFFSET_DAYS}d", python, "-c", "import time; print(int(time.time()))"],
                     timeout=30)
    if clock.exit_code != 0 or not clock.stdout.strip().isdigit():
        missing["time"] = f"libfaketime (`faketime`) unavailable on {host.name}: {_why(clock)}"
    fuse = host.run(["sh", "-c", _FS_ORDER_PROBE], timeout=30)
    if fuse.exit_code != 0 or fuse.stdout.split() != ["ok"]:
        missing["fs_order"] = f"disorderfs (FUSE) cannot mount on {host.name}: {_why(fuse)}"
    return missing


# A real mount and unmount in a scratch directory: disorderfs installed, /dev/fuse present, allowed.
_FS_ORDER_PROBE = ('d=$(mktemp -d) && mkdir "$d/r" "$d/m" && disorderfs -q --shuffle-dirents=yes "$d/r" "$d/m" '
                   '&& { fusermount -u "$d/m" 2>/dev/null || umount "$d/m"; } && rm -rf "$d" && echo ok')


def fs_order_mount(src_dir: str) -> list[str]:
    """Move SRC_DIR aside and show it again at SRC_DIR through disorderfs (entries shuffled)."""
    lower, src = shlex.quote(src_dir + ".lower"), shlex.quote(src_dir)
    return ["sh", "-c", f"mv {src} {lower} && mkdir {src} && disorderfs -q --shuffle-dirents=yes {lower} {src}"]


def fs_order_unmount(src_dir: str) -> list[str]:
    src = shlex.quote(src_dir)
    return ["sh", "-c", f"fusermount -u {src} 2>/dev/null || umount {src}"]


def _why(result) -> str:
    text = (result.stderr or result.stdout).strip().splitlines()
    return f"exit {result.exit_code}" + (f", {text[-1][:160]}" if text else "")


def noise(side: str) -> dict[str, str]:
    digest = hashlib.sha256(f"assay-noise-{side}".encode()).hexdigest()
    width = 8 + int(digest[0], 16) * 3  # different lengths shift any leaked offsets
    return {"ASSAY_BUILD_LABEL": side, "ASSAY_ENV_NOISE": digest[:width], "COLUMNS": str(80 + int(digest[1:3], 16)),
            f"ASSAY_NOISE_{side.upper()}": "1"}


def env_for(plan: Plan, build_dir: str, missing: Mapping[str, str]) -> dict[str, str]:
    """The variables the plan sets (identity, TZ, locale, HOME, noise)."""
    host_side = plan["hostname"] if "hostname" not in missing else "a"
    return {
        "USER": USERS[plan["user"]], "LOGNAME": USERS[plan["user"]],
        "HOSTNAME": HOSTNAMES[host_side],
        "TZ": TZS[plan["tz"]], "LANG": LOCALES[plan["locale"]], "LC_ALL": LOCALES[plan["locale"]],
        "HOME": f"{build_dir}/{HOMES[plan['home_dir']]}",
        **noise(plan["env_noise"]),
    }


def wrap(argv: list[str], plan: Plan, missing: Mapping[str, str]) -> list[str]:
    """ARGV run under the plan's hostname, umask, uid and clock, with no shell parsing any of ARGV."""
    inner: list[str] = []
    if plan["user"] == "b" and "user" not in missing:
        inner += ["unshare", "--user", f"--map-user={UID_B}", f"--map-group={UID_B}"]
    if plan["time"] == "b" and "time" not in missing:
        inner += ["faketime", "-f", f"+{CLOCK_OFFSET_DAYS}d"]
    script = f"umask {UMASKS[plan['umask']]} && exec {' '.join(shlex.quote(a) for a in inner)} \"$@\""
    outer: list[str] = []
    if "hostname" not in missing:  # a's hostname is set too: the host's own name must not leak into a
        script = f"hostname {HOSTNAMES[plan['hostname']]} && {script}"
        outer = ["unshare", "--uts"]
    return [*outer, "sh", "-c", script, "sh", *argv]


def record(plan: Plan, missing: Mapping[str, str], shown_dir: str) -> dict[str, dict]:
    """The variations as one build had them (build receipt): value, and why any could not vary."""
    out: dict[str, dict] = {}
    for name in NAMES:
        side = plan[name]
        entry = {"side": side, "value": _value(name, side, shown_dir)}
        if name == "user" and name in missing:  # the name still varies; the uid cannot
            entry = {"side": side, "value": f"{USERS[side]} (host uid)", "not_varied": "uid: " + missing[name]}
        elif name == "hostname" and name in missing:  # whatever the machine is called: unset by us
            entry = {"side": "a", "value": "the host's own hostname", "not_varied": missing[name]}
        elif name in missing:
            entry = {"side": "a", "value": _value(name, "a", shown_dir), "not_varied": missing[name]}
        out[name] = entry
    return out


def _value(name: str, side: str, shown_dir: str) -> str:
    if name == "build_path":
        return shown_dir
    if name == "hostname":
        return HOSTNAMES[side]
    if name == "user":
        return f"{USERS[side]} (uid {UID_B} in a user namespace)" if side == "b" else f"{USERS[side]} (host uid)"
    if name == "umask":
        return UMASKS[side]
    if name == "tz":
        return TZS[side]
    if name == "locale":
        return LOCALES[side]
    if name == "time":
        return f"clock +{CLOCK_OFFSET_DAYS} days (libfaketime)" if side == "b" else "host clock"
    if name == "home_dir":
        return "${BUILD_DIR}/" + HOMES[side]
    if name == "env_noise":
        return f"noise set {side}"
    return "directory entries shuffled (disorderfs)" if side == "b" else "the file system's own order"


def summary(record_a: dict, record_b: dict, enabled: tuple[str, ...]) -> dict[str, dict]:
    """a's and b's value per variation and whether it really differed (the reproducibility record)."""
    out = {}
    for name in NAMES:
        va, vb = record_a[name], record_b[name]
        entry = {"a": va["value"], "b": vb["value"], "varied": va["value"] != vb["value"]}
        why = "not asked for (--variations)" if name not in enabled else vb.get("not_varied") or va.get("not_varied")
        if why:
            entry["not_varied"] = why
        out[name] = entry
    return out
