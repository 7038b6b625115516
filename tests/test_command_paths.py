"""Commands and paths that do not depend on the caller's shell: [hub] path, ./ paths, lookup."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import TextContent

from mcp_hub.clients.launch import child_path
from mcp_hub.config import commands
from mcp_hub.config.model import ServerConfig, load_config, parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.upstream.stdio import prespawn
from mcp_hub.upstream.transports import child_environment
from tests.hubtest import PY, ROOT

pytestmark = pytest.mark.anyio

HUB = str(Path(sys.prefix) / "bin" / "mcp-hub")
BARE = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}


@pytest.fixture(autouse=True)
def _clean() -> object:
    yield
    prespawn.discard_all()


# ── the helpers ──────────────────────────────────────────────────────────────


def test_only_marked_values_resolve_against_the_base() -> None:
    base = "/srv/cfg"
    assert commands.resolve_relative("./data/x.txt", base) == "/srv/cfg/data/x.txt"
    assert commands.resolve_relative("./", base) == "/srv/cfg"
    assert commands.resolve_relative("../other", base) == "/srv/other"
    assert commands.resolve_relative("--out=./o", base) == "--out=/srv/cfg/o"
    for unchanged in (".", "data/x", "/abs", "--flag", "-x=1", "--sep=.", "a./b", "${X}"):
        assert commands.resolve_relative(unchanged, base) == unchanged


def test_args_follow_the_cwd_when_it_is_set() -> None:
    got = commands.resolve_server_paths("./bin/s", ["./a"], None, "/cfg")
    assert got == ("/cfg/bin/s", ["/cfg/a"], None)
    got = commands.resolve_server_paths("./s", ["./a", "b"], "./work", "/cfg")
    assert got == ("/cfg/work/s", ["/cfg/work/a", "b"], "/cfg/work")
    got = commands.resolve_server_paths("s", ["./a"], "/elsewhere", "/cfg")
    assert got == ("s", ["/elsewhere/a"], "/elsewhere")


def test_the_search_path_goes_around_the_childs_path() -> None:
    search = commands.search_path(["./bin", "/opt/x"], True, "/cfg")
    assert search.before == ("/cfg/bin", "/opt/x")
    assert search.after == (commands.hub_bin_dir(),)
    env = search.apply({"PATH": "/usr/bin:/opt/x:/bin", "HOME": "/h"})
    assert env == {"PATH": f"/cfg/bin:/opt/x:/usr/bin:/bin:{commands.hub_bin_dir()}",
                   "HOME": "/h"}
    assert search.apply({})["PATH"].split(os.pathsep)[2:-1] == os.defpath.split(os.pathsep)
    assert commands.SearchPath().apply({"A": "1"}) == {"A": "1"}


def test_find_command_and_the_hint_when_it_is_missing(tmp_path: Path) -> None:
    tool = tmp_path / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert commands.find_command("tool", str(tmp_path)) == str(tool)
    assert commands.find_command("tool", "/usr/bin:/bin") is None
    assert commands.find_command("sub/tool", None, str(tmp_path.parent)) is None
    assert commands.find_command(f"{tmp_path.name}/tool", None, str(tmp_path.parent)) \
        == f"{tmp_path.name}/tool"
    hint = commands.not_found_message("mcp-server-time")
    assert "[hub] path" in hint and "absolute path" in hint and "mcp-hub check" in hint


def test_shebang_programs_are_read(tmp_path: Path) -> None:
    cases = {"#!/usr/bin/env node\n": "node", "#!/usr/bin/env -S node --flag\n": "node",
             "#!/bin/sh\n": None, "no shebang": None, "#!/usr/bin/env\n": None}
    for i, (head, want) in enumerate(cases.items()):
        script = tmp_path / f"s{i}"
        script.write_text(head)
        assert commands.shebang_program(str(script)) == want
    assert commands.shebang_program(str(tmp_path / "missing")) is None


# ── the config ───────────────────────────────────────────────────────────────


CONFIG = """
[hub]
path = ["./bin", "~/tools"]
hub_bin_on_path = false
startup_timeout = 60

[servers.report]
command = "report"
args = ["./data/file.txt", "--out=./out", "plain", "../sibling"]

[servers.worker]
command = "../bin/report"
cwd = "./work"
args = ["./in-cwd.txt"]
"""


def _project(tmp_path: Path) -> Path:
    """A folder with servers.toml, bin/report (echo fixture reporting argv and cwd), work/."""
    project = tmp_path / "project"
    (project / "bin").mkdir(parents=True)
    (project / "work").mkdir()
    report = project / "bin" / "report"
    report.write_text(
        "#!/bin/sh\n"
        'export REPORT_ARGS="$*" REPORT_CWD="$(pwd)"\n'
        f'PYTHONPATH="{ROOT}" exec "{PY}" -m tests.fixtures.echo_server\n')
    report.chmod(report.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    (project / "servers.toml").write_text(CONFIG)
    return project


@pytest.mark.parametrize("start_in", ["/", "project", "elsewhere"])
def test_dot_paths_resolve_against_the_config_folder_from_anywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start_in: str
) -> None:
    project = _project(tmp_path)
    where = {"/": Path("/"), "project": project, "elsewhere": tmp_path}[start_in]
    monkeypatch.chdir(where)
    given = "servers.toml" if start_in == "project" else str(project / "servers.toml")
    config = load_config(given)
    report, worker = config.servers["report"], config.servers["worker"]
    assert report.args == [f"{project}/data/file.txt", f"--out={project}/out", "plain",
                           f"{tmp_path}/sibling"]
    assert (worker.command, worker.cwd, worker.args) == (
        f"{project}/bin/report", f"{project}/work", [f"{project}/work/in-cwd.txt"])
    path = child_environment(report, BARE)["PATH"]
    assert path == f"{project}/bin:{Path('~/tools').expanduser()}:/usr/bin:/bin"


def test_a_bare_relative_hub_path_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"hub.path: 'bin': write ./bin"):
        parse_config('[hub]\npath = ["bin"]\n')


def test_the_hubs_bin_folder_is_on_the_path_by_default() -> None:
    config = parse_config('[servers.a]\ncommand = "x"\n')
    assert (child_path(config.servers["a"], BARE) or "").endswith(f":{commands.hub_bin_dir()}")


def test_a_changed_hub_path_restarts_servers_on_reload() -> None:
    from mcp_hub.upstream.manager import _differs

    def server(path: str) -> ServerConfig:
        return parse_config(f'[hub]\npath = ["{path}"]\n[servers.x]\ncommand = "y"\n')\
            .servers["x"]

    assert _differs(server("/a"), server("/b"))
    assert not _differs(server("/a"), server("/a"))


# ── end to end: a hub started elsewhere, with a bare environment ─────────────


async def _env_of(session: ClientSession, tool: str, name: str) -> str:
    result = await session.call_tool(tool, {"name": name})
    first = result.content[0]
    assert isinstance(first, TextContent)
    return first.text


async def test_a_hub_started_in_root_runs_servers_by_dot_paths_and_adopts_them_early(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path)
    # worker's cwd holds a folder it must resolve against; the early start must agree.
    params = StdioServerParameters(
        command=HUB, args=["serve", "--log-level", "debug", "--config",
                           str(project / "servers.toml")],
        cwd="/", env=BARE)
    errlog = tmp_path / "hub.log"
    with anyio.fail_after(60), errlog.open("w") as err:
        async with (stdio_client(params, errlog=err) as (read, write),
                    ClientSession(read, write) as session):
            await session.initialize()
            tools = {t.name for t in (await session.list_tools()).tools}
            assert {"report_env", "worker_env"} <= tools
            assert await _env_of(session, "report_env", "REPORT_ARGS") == (
                f"{project}/data/file.txt --out={project}/out plain {tmp_path}/sibling")
            assert await _env_of(session, "report_env", "REPORT_CWD") == "/"
            assert await _env_of(session, "worker_env", "REPORT_CWD") == f"{project}/work"
            assert await _env_of(session, "worker_env", "REPORT_ARGS") == \
                f"{project}/work/in-cwd.txt"
            assert (await _env_of(session, "report_env", "PATH")).startswith(f"{project}/bin:")
    log = errlog.read_text()
    assert "[report] using the process started early" in log
    assert "[worker] using the process started early" in log


def test_check_shows_the_childs_path_and_how_to_fix_a_missing_command(tmp_path: Path) -> None:
    config = tmp_path / "servers.toml"
    config.write_text('[hub]\npath = ["./bin"]\n[servers.time]\ncommand = "mcp-server-nope"\n')
    done = subprocess.run([HUB, "check", "--config", str(config)], cwd="/", env=BARE,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert f"PATH of stdio servers: {tmp_path}/bin:/usr/bin:/bin:{commands.hub_bin_dir()}" \
        in done.stdout
    assert "command not found: mcp-server-nope (not on the child's PATH" in done.stdout
    assert "add its folder to [hub] path" in done.stdout
