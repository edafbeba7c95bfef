"""Signing the manifest with the examiner's Ed25519 key, and checking the signature.

The signature is Ed25519 over the exact bytes of OUT/manifest.json, written base64-encoded on
one line to OUT/manifest.json.sig (64 bytes once decoded), so that OpenSSL checks it too
(`base64 -d manifest.json.sig > sig.bin; openssl pkeyutl -verify -pubin -inkey key.pub
-rawin -in manifest.json -sigfile sig.bin`). A key is named by its fingerprint as OpenSSH
prints it (`ssh-keygen -lf`): `SHA256:` and the unpadded base64 of the SHA-256 of the public
key's OpenSSH encoding. Private keys are read as PEM (PKCS #8) or OpenSSH; one protected by a
passphrase takes it from KVFORENSICS_KEY_PASSPHRASE. Public keys are read as PEM or as an
OpenSSH line (`ssh-ed25519 AAAA…`).

`cryptography` is imported inside the functions that need it: commands that do not sign or
check a signature never load it."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forensics.errors import UsageError

PASSPHRASE_ENV = "KVFORENSICS_KEY_PASSPHRASE"
KEY_MOST = 64 * 1024  # no Ed25519 key file is anywhere near this


@dataclass(frozen=True)
class SigningKey:
    """An examiner's Ed25519 private key (a cryptography Ed25519PrivateKey) and the
    fingerprint of its public half."""

    private: Any
    fingerprint: str


def _key_bytes(path: Path, what: str) -> bytes:
    if not path.is_file():
        raise UsageError(f"{what} {path}: no such file; give the path of an Ed25519 key")
    if path.stat().st_size > KEY_MOST:
        raise UsageError(f"{what} {path} is larger than any Ed25519 key file; not read")
    return path.read_bytes()


def fingerprint(public: Any) -> str:
    """`SHA256:<base64>`, as `ssh-keygen -lf` prints it for the key."""
    from cryptography.hazmat.primitives import serialization

    line = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    blob = base64.b64decode(line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def load_signing_key(path: Path) -> SigningKey:
    """The Ed25519 private key in path (PEM or OpenSSH); a usage error (exit 2) naming the fix
    for anything else."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    data = _key_bytes(path, "--sign-key")
    secret = os.environ.get(PASSPHRASE_ENV)
    password = secret.encode() if secret else None
    loader = (
        serialization.load_ssh_private_key
        if b"BEGIN OPENSSH PRIVATE KEY" in data
        else serialization.load_pem_private_key
    )
    try:
        key = loader(data, password=password)
    except TypeError as exc:  # a passphrase missing, or given for a key without one
        raise UsageError(
            f"--sign-key {path}: {exc}; set {PASSPHRASE_ENV} to the key's passphrase "
            "(or unset it for a key without one)"
        ) from None
    except UnsupportedAlgorithm as exc:  # an OpenSSH key's passphrase needs bcrypt
        raise UsageError(
            f"--sign-key {path} cannot be opened here ({exc}); install bcrypt (pip install "
            "bcrypt), or give the key as PEM: ssh-keygen -p -m PKCS8 -f KEY rewrites it"
        ) from None
    except (ValueError, binascii.Error) as exc:
        raise UsageError(
            f"--sign-key {path} is not a readable private key ({exc}); give an Ed25519 key "
            "in PEM or OpenSSH format (ssh-keygen -t ed25519, or openssl genpkey -algorithm "
            "ed25519)"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(
            f"--sign-key {path} is a {type(key).__name__}, not an Ed25519 key; give an "
            "Ed25519 key (ssh-keygen -t ed25519)"
        )
    return SigningKey(key, fingerprint(key.public_key()))


def load_public_key(path: Path) -> Any:
    """The Ed25519 public key in path (PEM or an OpenSSH line): exit 2 for anything else."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    data = _key_bytes(path, "--pubkey")
    key: object  # the two loaders return different unions of key types
    try:
        if data.lstrip().startswith(b"-----"):
            key = serialization.load_pem_public_key(data)
        else:
            key = serialization.load_ssh_public_key(data.strip())
    except (ValueError, binascii.Error, IndexError) as exc:
        raise UsageError(
            f"--pubkey {path} is not a readable public key ({exc}); give the examiner's "
            "Ed25519 public key as PEM or an OpenSSH line (ssh-ed25519 AAAA…)"
        ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise UsageError(f"--pubkey {path} is a {type(key).__name__}, not an Ed25519 key")
    return key


def sign_file(key: SigningKey, path: Path, signature: Path) -> None:
    """Write the base64 Ed25519 signature over path's bytes to signature (one line)."""
    sig = key.private.sign(path.read_bytes())
    signature.write_text(base64.b64encode(sig).decode() + "\n", encoding="ascii")


def signature_matches(public: Any, path: Path, signature: Path) -> bool:
    """Whether signature holds a valid base64 Ed25519 signature over path's bytes by public."""
    from cryptography.exceptions import InvalidSignature

    try:
        sig = base64.b64decode(signature.read_bytes().strip(), validate=True)
        public.verify(sig, path.read_bytes())
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True
