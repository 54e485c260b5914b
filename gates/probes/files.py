"""File facts on the lane host: modes under a state root, free disk, a tampered byte, and
whether a secret appears in any file (counts only: the secret and the paths stay here)."""

import os
import shutil
import stat


def perms(a):
    """Every directory and file under each root, with whether group or others may read it."""
    out = []
    for root in a["roots"]:
        if not os.path.exists(root):
            continue
        for dirpath, dirs, files in os.walk(root):
            for name in [None] + files:
                p = dirpath if name is None else os.path.join(dirpath, name)
                mode = os.lstat(p).st_mode
                out.append({"kind": "dir" if name is None else "file", "mode": oct(stat.S_IMODE(mode)),
                            "open_to_others": bool(mode & 0o077)})
    return {"entries": len(out), "dirs": sum(e["kind"] == "dir" for e in out),
            "files": sum(e["kind"] == "file" for e in out), "open": [e for e in out if e["open_to_others"]]}


def disk(a):
    path = a["path"]
    while not os.path.exists(path):
        path = os.path.dirname(path) or "/"
    usage = shutil.disk_usage(path)
    return {"free_bytes": usage.free, "total_bytes": usage.total}


def tamper(a):
    """Flip one byte in the middle of a file, in place."""
    with open(a["path"], "r+b") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(size // 2)
        byte = f.read(1)
        f.seek(size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    return {"size": size, "offset": size // 2}


def contains(a):
    secret = a["secret"].encode()
    scanned = hits = 0
    for root in a["roots"]:
        if os.path.isfile(root):
            walk = [(os.path.dirname(root), [], [os.path.basename(root)])]
        else:
            walk = os.walk(root)
        for dirpath, _, files in walk:
            for name in files:
                p = os.path.join(dirpath, name)
                if a.get("skip") and os.path.abspath(p) in {os.path.abspath(s) for s in a["skip"]}:
                    continue
                try:
                    with open(p, "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                scanned += 1
                hits += secret in data
    return {"files_scanned": scanned, "files_with_secret": hits}


def checkpoint_files(a):
    """The live generation of a session's checkpoint (docs/API.md: <dir>/<sha256(key)>/current)."""
    import hashlib
    root = os.path.join(a["directory"], hashlib.sha256(a["session"].encode()).hexdigest())
    try:
        with open(os.path.join(root, "current")) as f:
            generation = f.read().strip()
    except OSError:
        return {"found": False}
    gdir = os.path.join(root, generation)
    return {"found": True, "tensors": os.path.join(gdir, "tensors.safetensors"),
            "tokens": os.path.join(gdir, "tokens.json")}


def read_json(a):
    import json
    with open(a["path"]) as f:
        return {"value": json.load(f)}


def log_events(a):
    """Records of one event from the engine's JSON Lines request log (digests and counts only)."""
    import json
    out = []
    try:
        with open(a["path"]) as f:
            for line in f:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("event") == a["event"]:
                    out.append(record)
    except OSError:
        pass
    return {"records": out}
