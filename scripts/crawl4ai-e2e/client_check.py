"""Crawl4AI's own Docker client (crawl4ai/docker_client.py at the exported
ref, unchanged) against trawl crawl: a batch crawl, a streamed crawl, a
deep crawl and /schema. Prints one PASS/FAIL line per check."""
import asyncio
import os
import sys

from crawl4ai import BrowserConfig, CrawlerRunConfig, CacheMode
from crawl4ai.docker_client import Crawl4aiDockerClient
from crawl4ai.deep_crawling import BFSDeepCrawlStrategy

BASE = os.environ["CRAWL4AI_TEST_URL"]
SITE = os.environ["SITE"]
failed = 0


def check(name, ok, detail=""):
    global failed
    print(("PASS " if ok else "FAIL ") + name + (": " + detail if detail and not ok else ""))
    if not ok:
        failed += 1


async def main():
    async with Crawl4aiDockerClient(base_url=BASE, verbose=False) as client:
        r = await client.crawl([SITE + "/html.html"], browser_config=BrowserConfig(headless=True),
                               crawler_config=CrawlerRunConfig(cache_mode=CacheMode.BYPASS))
        check("client.crawl one URL", r.success and "Moby-Dick" in r.markdown.raw_markdown, repr(r)[:300])
        rs = await client.crawl([SITE + "/html.html", SITE + "/links.html"],
                                crawler_config=CrawlerRunConfig(cache_mode=CacheMode.BYPASS))
        check("client.crawl two URLs", len(rs) == 2 and all(x.success for x in rs))
        gen = await client.crawl([SITE + "/html.html", SITE + "/links.html"],
                                 crawler_config=CrawlerRunConfig(stream=True, cache_mode=CacheMode.BYPASS))
        got = [x async for x in gen]
        check("client.crawl stream", len(got) == 2 and all(x.success for x in got), repr(got)[:300])
        deep = await client.crawl([SITE + "/py/"], crawler_config=CrawlerRunConfig(
            deep_crawl_strategy=BFSDeepCrawlStrategy(max_depth=1, max_pages=4)))
        deep = deep if isinstance(deep, list) else [deep]
        depths = sorted((x.metadata or {}).get("depth", -1) for x in deep)
        check("client.crawl deep (BFS, 4 pages)", len(deep) == 4 and depths == [0, 1, 1, 1], str(depths))
        schema = await client.get_schema()
        check("client.get_schema", "browser" in schema and "crawler" in schema, str(schema)[:200])


asyncio.run(main())
sys.exit(1 if failed else 0)
