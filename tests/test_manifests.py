"""The deploy manifests: README front matter for Hugging Face Spaces, and a valid Deta Space v0 Spacefile."""

import re
import tomllib

import yaml

from tests.conftest import ROOT


def requirement_version(name: str) -> str:
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if re.split(r"[\[=]", line)[0].strip().lower() == name:
            return line.split("==")[1].split()[0].strip()
    raise AssertionError(f"{name} is not pinned")


def oldest_python() -> tuple[int, ...]:
    """The oldest Python that pyproject.toml's requires-python admits (``>=3.11``)."""
    required = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    return tuple(int(part) for part in re.fullmatch(r">=\s*([\d.]+)", required).group(1).split("."))


def test_readme_front_matter_for_spaces() -> None:
    text = (ROOT / "README.md").read_text()
    match = re.match(r"^---\n(.*?)\n---\n", text, re.DOTALL)
    assert match, "README.md must start with YAML front matter"
    meta = yaml.safe_load(match.group(1))
    assert meta["sdk"] == "gradio"
    assert meta["app_file"] == "app.py"
    assert str(meta["sdk_version"]) == requirement_version("gradio")
    assert (ROOT / meta["app_file"]).exists()
    assert tuple(int(p) for p in str(meta["python_version"]).split(".")) >= oldest_python()
    assert 0 < len(meta["short_description"]) <= 60, "Spaces cuts a longer description"
    assert re.fullmatch(r"\d+[mh]", str(meta["startup_duration_timeout"])), "minutes or hours, as Spaces reads it"
    # Signed-in visitors: their own account (hf_oauth) and their own Inference allowance (the scope).
    assert meta["hf_oauth"] is True and "inference-api" in meta["hf_oauth_scopes"]
    assert meta["license"] == "apache-2.0" and "Apache License" in (ROOT / "LICENSE").read_text()[:200]
    assert "Version 2.0" in (ROOT / "LICENSE").read_text()[:200]


def test_readme_quick_start_is_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^make \w+$", section, re.MULTILINE)
    assert commands == ["make run", "make test"]


def test_spacefile_is_a_valid_v0_manifest() -> None:
    manifest = yaml.safe_load((ROOT / "Spacefile").read_text())
    assert manifest["v"] == 0
    micros = manifest["micros"]
    assert len(micros) == 1
    micro = micros[0]
    assert {"name", "src", "engine", "run"} <= set(micro)
    assert re.fullmatch(r"[a-z0-9-]+", micro["name"])
    assert micro["engine"] in {"python3.9", "python3.8", "nodejs16", "static", "custom"}
    if micro["engine"].startswith("python"):  # Deta's own Python engines are older than the project needs
        assert tuple(int(p) for p in micro["engine"].removeprefix("python").split(".")) >= oldest_python()
    assert micro["primary"] is True
    assert "app.py" in micro["run"]
    for env in micro["presets"]["env"]:
        assert env["name"].startswith("COPILOT_") and "default" in env


def test_a_bare_pip_install_builds_llama_cpp_portably() -> None:
    """A Space runs only ``pip install -r requirements.txt``: llama.cpp's portable flags travel on its line, the same
    flags the Makefile exports as CMAKE_ARGS."""
    line = next(r for r in (ROOT / "requirements.txt").read_text().splitlines() if r.startswith("llama-cpp-python=="))
    settings = {s.removeprefix("--config-settings=cmake.define.") for s in line.split()[1:]}
    make_flags = re.search(r"^export CMAKE_ARGS \?= (.*)$", (ROOT / "Makefile").read_text(), re.MULTILINE).group(1)
    assert {flag.removeprefix("-D") for flag in make_flags.split()} == settings
    assert "GGML_NATIVE=OFF" in settings
