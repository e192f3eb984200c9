"""The locked environments agree with pyproject.toml.

`./run` installs each command's environment from its lock file alone (locks/<set>.txt, with
--require-hashes --no-deps), so a lock that misses a requirement, pins a release its range refuses,
or lacks a hash would install something else than pyproject.toml says, or fail on a fresh machine.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
RUN = (ROOT / "run").read_text()
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
TOOLS = {"uv", "openapi-python-client", "decord"}  # locks of tools beside the package's environments


def _table(name: str) -> dict[str, str]:
    body = re.search(rf"declare -A {name}=\((.*?)\n\)", RUN, re.S)
    assert body, f"./run declares no {name}"
    return dict(re.findall(r'\[([\w-]+)\]="([^"]*)"', body.group(1)))


SETS = {name: extras.split(",") for name, extras in _table("SETS").items()}
CARRIED = {extra: Requirement(pin) for extra, pin in _table("CARRIED").items()}


def read_lock(path: Path) -> dict[str, tuple[Version, list[str]]]:
    """name -> (pinned version, hashes) of a requirements file as uv writes it."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    pins: dict[str, tuple[Version, list[str]]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        spec, *options = line.split(" --")
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name not in pins, f"{path.name}: {name} is locked twice"
        (pinned,) = req.specifier
        assert pinned.operator == "==", f"{path.name}: {spec} is not pinned with =="
        hashes = [o.removeprefix("hash=") for o in options if o.startswith("hash=sha256:")]
        assert hashes, f"{path.name}: {spec} has no sha256 hash"
        pins[name] = (Version(pinned.version), hashes)
    return pins


def wanted(extras: list[str]) -> list[Requirement]:
    """pyproject.toml's requirements of the package with `extras`, for the platform the locks are for."""
    env = {**default_environment(), "python_version": "3.11", "sys_platform": "linux", "platform_machine": "x86_64"}
    found = []
    for raw in [*PROJECT["dependencies"], *(r for e in extras for r in PROJECT["optional-dependencies"][e])]:
        req = Requirement(raw)
        if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
            found.append(req)
    return found


def test_each_command_set_has_its_lock_file_and_no_lock_is_left_over() -> None:
    locks = {p.stem for p in (ROOT / "locks").glob("*.txt")}
    assert set(SETS) <= locks
    assert locks - set(SETS) == TOOLS
    for name, extras in SETS.items():
        header = (ROOT / "locks" / f"{name}.txt").read_text().splitlines()[0]
        assert f"the extras {','.join(extras)} " in header, f"locks/{name}.txt was locked for other extras: {header}"
        assert set(extras) <= set(PROJECT["optional-dependencies"]), f"{name}: an extra pyproject.toml lacks"


@pytest.mark.parametrize("name", sorted(SETS))
def test_every_requirement_is_locked_at_a_release_its_range_admits(name: str) -> None:
    pins = read_lock(ROOT / "locks" / f"{name}.txt")
    for req in wanted(SETS[name]):
        key = canonicalize_name(req.name)
        assert key in pins, f"locks/{name}.txt does not lock {req} (run ./run lock)"
        assert req.specifier.contains(pins[key][0], prereleases=True), \
            f"locks/{name}.txt locks {key}=={pins[key][0]}, outside pyproject.toml's {req}"
    for extra in SETS[name]:
        if extra in CARRIED:
            carried = CARRIED[extra]
            key = canonicalize_name(carried.name)
            assert key in pins and carried.specifier.contains(pins[key][0]), \
                f"locks/{name}.txt does not lock {carried}, which ./run carries for {extra}"


@pytest.mark.parametrize("name", sorted(set(SETS) - {"test"}))
def test_every_set_locks_the_releases_the_suite_runs_on(name: str) -> None:
    """Each command installs the releases the tests ran on: a set's pins are the test set's."""
    tested = read_lock(ROOT / "locks" / "test.txt")
    for key, (version, _) in read_lock(ROOT / "locks" / f"{name}.txt").items():
        assert key in tested and tested[key][0] == version, \
            f"locks/{name}.txt locks {key}=={version}, locks/test.txt {tested.get(key, ('nothing',))[0]}"


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_the_tools_locks_pin_and_hash_everything(name: str) -> None:
    pins = read_lock(ROOT / "locks" / f"{name}.txt")
    assert canonicalize_name(name) in pins


@pytest.mark.parametrize("name", sorted(SETS))
def test_a_lock_holds_the_whole_dependency_tree(name: str) -> None:
    """Installed with --no-deps, a lock must name every package its requirements need, transitively (read
    from the packages' own metadata in this environment, which the test set's lock installed, and which
    holds every set's packages)."""
    pins = read_lock(ROOT / "locks" / f"{name}.txt")
    carried = {canonicalize_name(CARRIED[e].name) for e in SETS[name] if e in CARRIED}
    env = default_environment()
    seen: dict[str, set[str]] = {}
    todo = [(canonicalize_name(r.name), set(r.extras)) for r in wanted(SETS[name])]
    while todo:
        key, extras = todo.pop()
        if key in seen and extras <= seen[key]:
            continue
        seen[key] = seen.get(key, set()) | extras
        assert key in pins, f"locks/{name}.txt misses {key}, which the locked packages need"
        if key in carried:
            continue  # installed without its declared dependencies
        try:
            requires = importlib.metadata.distribution(key).requires or []
        except importlib.metadata.PackageNotFoundError:
            pytest.fail(f"{key} is not installed here: this environment was not installed from locks/test.txt")
        for raw in requires:
            req = Requirement(raw)
            if req.marker is None or any(req.marker.evaluate({**env, "extra": e}) for e in {"", *seen[key]}):
                todo.append((canonicalize_name(req.name), set(req.extras)))


def test_this_environment_is_the_test_lock() -> None:
    """What the suite runs on is what locks/test.txt names, release for release."""
    pins = read_lock(ROOT / "locks" / "test.txt")
    for key, (version, _) in pins.items():
        installed = Version(importlib.metadata.version(key))
        assert installed == version, f"{key} {installed} is installed, locks/test.txt names {version}"


@pytest.mark.parametrize(("package", "refused"), [
    ("litellm", ["1.82.7", "1.82.8"]),  # published with a credential stealer run from a .pth file
    ("starlette", ["1.0.0", "0.48.0"]),  # Host header desynchronisation (CVE-2026-48710), fixed in 1.0.1
])
def test_known_bad_releases_are_refused_by_the_requirements(package: str, refused: list[str]) -> None:
    reqs = [Requirement(r) for r in [*PROJECT["dependencies"], *sum(PROJECT["optional-dependencies"].values(), [])]]
    mine = [r for r in reqs if canonicalize_name(r.name) == package]
    assert mine, f"pyproject.toml does not constrain {package}"
    for release in refused:
        assert not any(r.specifier.contains(release, prereleases=True) for r in mine), f"{package} {release} admitted"
