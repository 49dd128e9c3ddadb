"""`pip install ./integrations/nagents` in a fresh virtual environment gives a working module.

This needs PyPI (for the build backend, flit_core, and for nagents and its dependencies), as
installing the package does anywhere.
"""

import json
import os
import subprocess
import sys
import textwrap

from conftest import REPO
from skillcat_support import skill_md
from skillcat_support import write_atomic

# Run inside the fresh environment with -I: neither this folder, the working directory nor
# PYTHONPATH is on sys.path, so the module can only come from what pip installed.
SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import skillcat_remote
    from skillcat_remote import RemoteSkillDiscoverer

    async def main(url, target):
        remote = RemoteSkillDiscoverer(url)
        (skill,) = await remote.discover()
        done = await remote.download(skill, target)
        return {"module": skillcat_remote.__file__, "loaded": await remote.load(skill), "files": done.files}

    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
    """
)


def test_pip_install_in_a_fresh_virtual_environment_gives_a_working_module(serve, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    source = REPO / "integrations" / "nagents"
    before = sorted(os.listdir(source))
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet", "./integrations/nagents"],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    # The build wrote nothing into the source folder (no build/, dist/ or *.egg-info).
    assert sorted(os.listdir(source)) == before

    write_atomic(tmp_path / "skills/hello/SKILL.md", skill_md("hello", "Says hello"))
    write_atomic(tmp_path / "skills/hello/scripts/hello.sh", "#!/bin/sh\necho hello\n")
    server = serve(tmp_path / "skills")
    run = subprocess.run(
        [str(python), "-I", "-c", SCRIPT, server.url, str(tmp_path / "hello")],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    result = json.loads(run.stdout)
    assert result["module"].startswith(str(venv)), result
    assert result["loaded"] == skill_md("hello", "Says hello")
    assert result["files"] == 2
    assert (tmp_path / "hello/scripts/hello.sh").read_text() == "#!/bin/sh\necho hello\n"
