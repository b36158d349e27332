"""MkDocs hooks: pages that arrive separately (`OPTIONAL_PAGES`) are in the navigation and
linked from other pages once their file exists; until then the build leaves their navigation
entry out and shows a link to them as plain text, so `mkdocs build --strict` passes either
way. Every other page and link is checked as usual."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

OPTIONAL_PAGES = ("assessment.md", "notebooks.md", "profiles.md", "reward-audit.md")


def missing_pages(docs_dir: str) -> set[str]:
    return {page for page in OPTIONAL_PAGES if not (Path(docs_dir) / page).is_file()}


def without_pages(nav: list[Any], missing: set[str]) -> list[Any]:
    kept = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        if isinstance(value, list):
            value = without_pages(value, missing)
            if value:
                kept.append({next(iter(entry)): value})
        elif value not in missing:
            kept.append(entry)
    return kept


def on_config(config, **_):
    missing = missing_pages(config["docs_dir"])
    if missing and config["nav"]:
        config["nav"] = without_pages(config["nav"], missing)
    return config


def on_page_markdown(markdown: str, page, config, **_) -> str:
    missing = missing_pages(config["docs_dir"])
    if not missing:
        return markdown
    names = "|".join(re.escape(name) for name in sorted(missing))
    return re.sub(rf"\[([^\]]+)\]\((?:\.\./)?(?:{names})(?:#[^)]*)?\)", r"\1", markdown)
