"""Ed25519 keys: the pipeline's release key, people's own keys, safe file modes, loading, key ids."""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from releases.atomic import write_atomic
from releases.canonical import sha256_hex
from releases.errors import KeyFileError

PRIVATE_NAME = "release.key.pem"
PUBLIC_NAME = "release.pub.pem"


def public_pem(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def key_id(public_key: Ed25519PublicKey) -> str:
    """sha256 (hex) of the raw 32-byte Ed25519 public key."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return sha256_hex(raw)


def ensure_local_key(directory: str | Path) -> tuple[Path, bool]:
    """Return (private key path, created); generate a key pair in `directory` if none is there."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    private_path = directory / PRIVATE_NAME
    if private_path.exists():
        key = load_private_key(private_path)
        public_path = directory / PUBLIC_NAME
        if not public_path.exists():
            write_atomic(public_path, public_pem(key.public_key()), 0o644)
        return private_path, False
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    write_atomic(private_path, pem, 0o600)
    write_atomic(directory / PUBLIC_NAME, public_pem(key.public_key()), 0o644)
    return private_path, True


def load_private_key(path: str | Path) -> Ed25519PrivateKey:
    """Load an Ed25519 private key PEM; refuse one readable by group or other."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise KeyFileError(f"private key {path.name}: cannot stat: {exc.strerror}") from exc
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyFileError(
            f"private key {path.name} has mode {stat.S_IMODE(st.st_mode):04o}; it must not be accessible "
            f"by group or other (chmod 600 it)"
        )
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"private key {path.name}: not an unencrypted PEM private key: {exc}") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"private key {path.name}: expected Ed25519, got {type(key).__name__}")
    return key


def load_public_key(path_or_pem: str | Path | bytes | Ed25519PublicKey) -> Ed25519PublicKey:
    """Accept a key object, PEM bytes/text, or a path to a PEM file."""
    if isinstance(path_or_pem, Ed25519PublicKey):
        return path_or_pem
    if isinstance(path_or_pem, bytes):
        data, name = path_or_pem, "<pem>"
    elif isinstance(path_or_pem, str) and path_or_pem.lstrip().startswith("-----BEGIN"):
        data, name = path_or_pem.encode("ascii"), "<pem>"
    else:
        path = Path(path_or_pem)
        try:
            data, name = path.read_bytes(), path.name
        except OSError as exc:
            raise KeyFileError(f"public key {path}: cannot read: {exc.strerror}") from exc
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"public key {name}: not a PEM public key: {exc}") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"public key {name}: expected Ed25519, got {type(key).__name__}")
    return key


_PERSON = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def default_person_keys_dir() -> Path:
    """Where a person's private keys live: $XDG_CONFIG_HOME/assay/keys, else ~/.config/assay/keys."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "assay" / "keys"


def person_key_path(name: str, directory: str | Path | None = None) -> Path:
    """The private key file of person `name` (NAME.pem) in `directory` (default: the user's keys dir)."""
    if not _PERSON.match(name):
        raise KeyFileError(f"signer name {name!r} must match {_PERSON.pattern} (as in assay.toml)")
    return Path(directory or default_person_keys_dir()) / f"{name}.pem"


def new_person_key(name: str, directory: str | Path | None = None) -> tuple[Path, Ed25519PublicKey]:
    """Create NAME.pem (mode 0600, directory 0700) for an approver or waiver grantor; never overwrite one."""
    path = person_key_path(name, directory)
    if path.exists():
        raise KeyFileError(f"{path} already exists; a key is never replaced (remove it yourself to rotate)")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    write_atomic(path, pem, 0o600)
    return path, key.public_key()
