"""Runs every demo_* function of Crawl4AI's docs/examples/docker/demo_docker_api.py
(exported and URL-rewritten by run.sh; its own main() runs only four) against
trawl crawl, one at a time, and grades each from what it printed: FAIL when it
printed one of the example's own error lines (HTTP Error, Request Error,
Unexpected Error, Request reported failure, Stream Error, FAILED), SKIP when
it skipped itself (no proxy list or model key in the environment), else PASS.
Only the example's console (a rich Console) is replaced, to capture it."""
import asyncio
import importlib.util
import io
import os
import re
import sys

import httpx
from rich.console import Console

path = sys.argv[1]
spec = importlib.util.spec_from_file_location("demo_docker_api", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
names = re.findall(r"^async def (demo_\w+)\(", open(path).read(), re.M)
ERRORS = ("Error hitting", "HTTP Error", "Request Error", "Unexpected Error", "Request reported failure", "Stream Error", "FAILED", "Error during")


async def main():
    failed = 0
    async with httpx.AsyncClient(base_url=mod.BASE_URL, timeout=300.0) as client:
        for name in names:
            buf = io.StringIO()
            mod.console = Console(file=buf, width=200, force_terminal=False, color_system=None)
            try:
                await getattr(mod, name)(client)
                exc = ""
            except Exception as e:  # the example's own code raising
                exc = f"raised {type(e).__name__}: {e}"
            out = buf.getvalue()
            if os.environ.get("VERBOSE"):
                print(out)
            bad = [l.strip() for l in out.splitlines() if any(e in l for e in ERRORS)]
            if exc or bad:
                failed += 1
                detail = exc or " | ".join(bad[:3])
                i = out.find("Error Response")
                if i >= 0:
                    detail += " " + " ".join(out[i:i + 400].split())
                print(f"FAIL {name}: {detail[:600]}")
            elif "SKIPPED" in out or "Skipping" in out:
                print(f"SKIP {name}: " + next((l.strip() for l in out.splitlines() if "SKIP" in l or "Skipping" in l), ""))
            else:
                print(f"PASS {name}")
    return failed


sys.exit(1 if asyncio.run(main()) else 0)
