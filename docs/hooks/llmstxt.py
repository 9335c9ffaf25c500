"""``llms.txt`` and ``llms-full.txt`` for people who read documentation through a model (https://llmstxt.org).

A mkdocs hook: ``llms.txt`` is the site's title, what it is, and one link per page under the navigation's
sections, each with the page's first sentence; ``llms-full.txt`` is every page's Markdown, in the navigation's
order (the generated reference pages included: the Python API's ``::: core.X`` lines, which mkdocstrings renders
as HTML, are written out as Markdown here from the same source, ``_api``). Links are relative to the site's root,
so no ``site_url`` is needed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.nav import Navigation, Section
from mkdocs.structure.pages import Page

_MARKDOWN: dict[str, str] = {}
"""Page source path -> its Markdown, as the build read it."""


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: object) -> str:
    _MARKDOWN[page.file.src_uri] = markdown
    return markdown


def _summary(markdown: str) -> str:
    """The page's first sentence of prose: no heading, table, list, admonition, code or image."""
    fence = False
    paragraph: list[str] = []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("```"):
            fence = not fence
            continue
        text = line.strip()
        if fence or not text or text[0] in "#|!<>:" or text.startswith(("- ", "* ", "::: ", "![")):
            if paragraph:
                break
            continue
        paragraph.append(text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", " ".join(paragraph))
    return text.split(". ")[0].rstrip(".") + "." if text else ""


def _pages(items: list[object], section: str) -> list[tuple[str, Page]]:
    found: list[tuple[str, Page]] = []
    for item in items:
        if isinstance(item, Section):
            found += _pages(item.children, item.title or section)
        elif isinstance(item, Page):
            found.append((section, item))
    return found


_NAV: list[tuple[str, Page]] = []


def on_nav(nav: Navigation, config: MkDocsConfig, files: object) -> Navigation:
    _NAV[:] = _pages(list(nav.items), "Start")
    return nav


_AUTODOC = re.compile(r"^::: (?P<path>[\w.]+)[ \t]*$", re.M)


def _api(markdown: str) -> str:
    """``markdown`` with each ``::: package.Name`` line written out: the object's signature, its docstring and
    its public members' (each dataclass field with its type and docstring), read by griffe as mkdocstrings does."""
    if not _AUTODOC.search(markdown):
        return markdown
    import griffe

    loaded: dict[str, Any] = {}

    def rendered(found: re.Match[str]) -> str:
        package, _, name = found["path"].partition(".")
        if package not in loaded:
            loaded[package] = griffe.load(package, search_paths=["."])
        try:
            obj = loaded[package][name] if name else loaded[package]
            return _object(obj.final_target if obj.is_alias else obj, name or package)
        except (KeyError, griffe.AliasResolutionError):
            return f"`{found['path']}`"

    return _AUTODOC.sub(rendered, markdown)


def _doc(obj: Any) -> str:
    return obj.docstring.value.strip() if obj.docstring is not None else ""


def _object(obj: Any, name: str) -> str:
    if obj.kind.value == "function":
        params = ", ".join(str(p.name) + (f": {p.annotation}" if p.annotation else "") for p in obj.parameters)
        head = f"### `{name}({params})`" + (f" -> `{obj.returns}`" if obj.returns else "")
    else:
        head = f"### `{name}`" + (f" ({obj.kind.value})" if obj.kind.value != "class" else "")
    out = [head, "", _doc(obj), ""]
    if obj.kind.value == "class":
        for member_name, member in obj.members.items():
            if member_name.startswith("_") or member.is_alias:
                continue
            if member.kind.value == "attribute":
                kind = f": `{member.annotation}`" if member.annotation else ""
                out.append(f"- `{member_name}`{kind}: {' '.join(_doc(member).split())}")
            elif member.kind.value == "function" and _doc(member):
                out.append(f"- `{member_name}()`: {' '.join(_doc(member).split())}")
    return "\n".join(out).strip() + "\n"


def on_post_build(config: MkDocsConfig) -> None:
    site = Path(config.site_dir)
    lines = [f"# {config.site_name}", "", f"> {config.site_description}", ""]
    section = None
    for title, page in _NAV:
        if title != section:
            section = title
            lines += ["", f"## {section}", ""]
        markdown = _MARKDOWN.get(page.file.src_uri, "")
        summary = _summary(markdown)
        lines.append(f"- [{page.title}](/{page.url}): {summary}" if summary else f"- [{page.title}](/{page.url})")
    (site / "llms.txt").write_text("\n".join(lines).replace("\n\n\n", "\n\n") + "\n", encoding="utf-8")
    full = [f"# {config.site_name}", "", f"> {config.site_description}", ""]
    for _, page in _NAV:
        full += [f"<!-- {page.file.src_uri} -->", _api(_MARKDOWN.get(page.file.src_uri, "")).strip(), ""]
    (site / "llms-full.txt").write_text("\n".join(full) + "\n", encoding="utf-8")
