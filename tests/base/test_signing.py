"""The examiner signs the manifest (investigate --sign-key) and verify --pubkey checks it:
--examiner and --case-ref override the environment, the key's fingerprint is recorded as
ssh-keygen prints it, OpenSSL accepts the signature, and a missing, foreign or stale signature
is a difference (exit 1) with a line that says so."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from support.samples import small_case

PEM = serialization.Encoding.PEM
NONE = serialization.NoEncryption()


def _write_keys(folder: Path, name: str) -> tuple[Path, Path, Path]:
    """A new Ed25519 key: private (PEM PKCS #8), public (PEM), public (OpenSSH line)."""
    key = ed25519.Ed25519PrivateKey.generate()
    private = folder / f"{name}.pem"
    private.write_bytes(key.private_bytes(PEM, serialization.PrivateFormat.PKCS8, NONE))
    public = key.public_key()
    pem = folder / f"{name}.pub.pem"
    pem.write_bytes(public.public_bytes(PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    line = folder / f"{name}.pub"
    ssh = serialization.Encoding.OpenSSH
    line.write_bytes(public.public_bytes(ssh, serialization.PublicFormat.OpenSSH) + b" ex\n")
    return private, pem, line


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A run signed with a PEM key, with --examiner and --case-ref over other env values."""
    from forensics.cli import run

    root = tmp_path_factory.mktemp("signed")
    private, pem, line = _write_keys(root, "examiner")
    case = small_case(root)
    out = root / "out"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KVFORENSICS_EXAMINER", "from the environment")
        mp.setenv("KVFORENSICS_CASE_REF", "ENV-1")
        code = run(
            [
                "investigate",
                str(case),
                "--out",
                str(out),
                "--examiner",
                "A. Examiner",
                "--case-ref",
                "TICKET-47",
                "--sign-key",
                str(private),
            ]
        )
    assert code in (0, 1)
    return {"case": case, "out": out, "private": private, "pem": pem, "line": line}


def _copy(signed: dict[str, Path], tmp_path: Path) -> Path:
    shutil.copytree(signed["out"], tmp_path / "out")
    return tmp_path / "out"


def _flat(text: str, err: str) -> str:
    return " ".join((text + err).split())


def test_the_manifest_is_signed_and_names_examiner_case_and_key(
    signed: dict[str, Path], cli: Any
) -> None:
    out = signed["out"]
    custody = json.loads((out / "manifest.json").read_text())["custody"]
    assert custody["examiner"] == "A. Examiner" and custody["case_ref"] == "TICKET-47"
    listed = subprocess.run(
        ["ssh-keygen", "-lf", str(signed["line"])], capture_output=True, text=True, check=False
    )
    if listed.returncode == 0:  # the fingerprint as ssh-keygen prints it
        assert listed.stdout.split()[1] == custody["signing_key"]
    assert custody["signing_key"].startswith("SHA256:") and len(custody["signing_key"]) == 50
    sig = base64.b64decode((out / "manifest.json.sig").read_text(encoding="ascii").strip())
    assert len(sig) == 64
    for pub in (signed["pem"], signed["line"]):
        code, text, err = cli("verify", out, "--case", signed["case"], "--pubkey", pub)
        assert code == 0, text + err
        assert f"signature: good: manifest.json is signed by the key {custody['signing_key']}" in (
            _flat(text, err)
        )
    code, text, err = cli("verify", out, "--case", signed["case"], "--json")
    assert code == 0 and "present, not checked" in json.loads(text)["signature"]


def test_openssl_accepts_the_signature(signed: dict[str, Path], tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    out = signed["out"]
    raw = tmp_path / "sig.bin"
    raw.write_bytes(base64.b64decode((out / "manifest.json.sig").read_text().strip()))
    checked = subprocess.run(
        ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(signed["pem"]), "-rawin"]
        + ["-in", str(out / "manifest.json"), "-sigfile", str(raw)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0 and "Verified Successfully" in checked.stdout, checked


def test_another_key_or_an_edited_manifest_fails_the_signature(
    signed: dict[str, Path], tmp_path: Path, cli: Any
) -> None:
    import hashlib

    out = _copy(signed, tmp_path)
    _, other, _ = _write_keys(tmp_path, "other")
    code, text, err = cli("verify", out, "--case", signed["case"], "--pubkey", other)
    flat = _flat(text, err)
    assert code == 1 and "manifest.json.sig: not a signature of this manifest by --pubkey" in flat
    assert "the manifest names the key SHA256:" in flat
    # the manifest edited and its anchor rewritten to match: only the signature tells
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["custody"]["examiner"] = "Somebody Else"
    (out / "manifest.json").write_text(json.dumps(manifest))
    digest = hashlib.sha256((out / "manifest.json").read_bytes()).hexdigest()
    (out / "manifest.json.sha256").write_text(f"{digest}  manifest.json\n")
    assert cli("verify", out, "--case", signed["case"])[0] == 0  # without the key: unnoticed
    code, text, err = cli("verify", out, "--case", signed["case"], "--pubkey", signed["pem"])
    assert code == 1 and "not a signature of this manifest" in _flat(text, err)


def test_a_missing_signature_is_a_difference(
    signed: dict[str, Path], tmp_path: Path, cli: Any
) -> None:
    out = _copy(signed, tmp_path)
    (out / "manifest.json.sig").unlink()
    code, text, err = cli("verify", out, "--case", signed["case"])
    assert code == 1 and "manifest.json.sig: missing; the manifest names the signing key" in (
        _flat(text, err)
    )
    code, text, err = cli("verify", out, "--case", signed["case"], "--pubkey", signed["pem"])
    assert code == 1 and "manifest.json.sig: missing" in _flat(text, err)


def test_an_unsigned_run_fails_verify_with_a_pubkey(
    signed: dict[str, Path], tmp_path: Path, cli: Any
) -> None:
    from support.samples import small_case as fresh_case

    case = fresh_case(tmp_path)
    out = tmp_path / "out"
    assert cli("investigate", case, "--out", out)[0] in (0, 1)
    assert not (out / "manifest.json.sig").exists()
    assert json.loads((out / "manifest.json").read_text())["custody"]["signing_key"] is None
    code, text, err = cli("verify", out, "--pubkey", signed["pem"])
    assert code == 1 and "missing; the run was not signed" in _flat(text, err)


def test_keys_that_cannot_sign_are_refused_before_anything_is_written(
    signed: dict[str, Path], tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = small_case(tmp_path)
    rsa_key = tmp_path / "rsa.pem"
    rsa_key.write_bytes(
        rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            PEM, serialization.PrivateFormat.PKCS8, NONE
        )
    )
    locked = tmp_path / "locked.pem"  # PEM with a passphrase
    key = ed25519.Ed25519PrivateKey.generate()
    locked.write_bytes(
        key.private_bytes(
            PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"s3cret"),
        )
    )
    cases = [
        (rsa_key, "not an Ed25519 key"),
        (signed["pem"], "not a readable private key"),  # a public key given as the private
        (tmp_path / "absent.pem", "no such file"),
        (locked, "KVFORENSICS_KEY_PASSPHRASE"),
    ]
    for path, why in cases:
        code, text, err = cli("investigate", case, "--out", tmp_path / "out", "--sign-key", path)
        flat = _flat(text, err)
        assert code == 2 and why in flat and "internal error" not in flat, flat
        assert not (tmp_path / "out").exists()
    monkeypatch.setenv("KVFORENSICS_KEY_PASSPHRASE", "s3cret")
    code, text, err = cli("investigate", case, "--out", tmp_path / "out", "--sign-key", locked)
    assert code in (0, 1) and "manifest.json signed with the key SHA256:" in _flat(text, err)
    public = tmp_path / "locked.pub"
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
    )
    assert cli("verify", tmp_path / "out", "--pubkey", public)[0] == 0
    code, text, err = cli("verify", tmp_path / "out", "--pubkey", rsa_key)
    assert code == 2 and "not a readable public key" in _flat(text, err)


def test_an_openssh_key_signs_or_is_refused_clearly(tmp_path: Path) -> None:
    """ssh-keygen's own key files: one without a passphrase signs; one with a passphrase
    signs where bcrypt is installed, else is refused naming the fix (exit 2)."""
    from forensics.base.signing import load_signing_key
    from forensics.errors import UsageError

    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    for name, secret in (("plain", ""), ("locked", "s3cret")):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", secret, "-f", str(tmp_path / name)],
            check=True,
        )
    printed = subprocess.run(
        ["ssh-keygen", "-lf", str(tmp_path / "plain.pub")], capture_output=True, text=True
    )
    assert load_signing_key(tmp_path / "plain").fingerprint == printed.stdout.split()[1]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KVFORENSICS_KEY_PASSPHRASE", "s3cret")
        try:
            import bcrypt  # noqa: F401
        except ImportError:
            with pytest.raises(UsageError, match="install bcrypt"):
                load_signing_key(tmp_path / "locked")
        else:
            assert load_signing_key(tmp_path / "locked").fingerprint.startswith("SHA256:")


def test_the_report_shows_who_ran_it_where_and_with_what(signed: dict[str, Path]) -> None:
    """The evidence section names the examiner, the case reference, the host, the signing
    key and the libraries; `kvforensics report` on an OUT shows the manifest's SHA-256."""
    import hashlib
    import html

    from forensics.report.facts import custody_of
    from forensics.report.stage import _manifest_sha256

    out = signed["out"]
    manifest = json.loads((out / "manifest.json").read_text())
    page = html.unescape((out / "report.html").read_text())
    section = page[page.index('id="manifest"') : page.index('id="queries"')]
    custody = manifest["custody"]
    for shown in ("A. Examiner", "TICKET-47", custody["host"], custody["signing_key"]):
        assert shown in section, shown
    assert f"duckdb {manifest['environment']['libraries']['duckdb']}" in section
    assert "written after this report: in manifest.json.sha256" in section
    digest = hashlib.sha256((out / "manifest.json").read_bytes()).hexdigest()
    assert _manifest_sha256(out, None) == digest  # what `kvforensics report --out OUT` shows
    facts = custody_of(manifest, digest)
    assert facts is not None and facts.manifest_sha256 == digest
    assert facts.examiner == "A. Examiner" and facts.signing_key == custody["signing_key"]
    assert custody_of({"run_id": "x"}, "") is None  # a database without a run: no custody table
