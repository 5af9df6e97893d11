#!/usr/bin/env python3
"""Checks the links of the built book (docs/book by default).

Every relative link, image, stylesheet and script of every built HTML page must name a file
that exists, and every `#anchor` must name an id (or a name) in the page it points to.
External links (http, https, mailto, ...) are not fetched, only listed: the machines this
runs on may have no internet. Exit status 1 on any broken link, 2 on a usage error.

    docs/check-links.py [BOOK_DIR]
"""

import os
import sys
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

# Attributes that point somewhere, per tag.
LINK_ATTRS = {
    "a": ("href",),
    "link": ("href",),
    "img": ("src",),
    "script": ("src",),
    "iframe": ("src",),
    "source": ("src",),
    "object": ("data",),
}


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []  # (line, tag, url)
        self.base = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if a.get(key):
                self.ids.add(a[key])
        if tag == "base" and a.get("href") is not None:
            self.base = a["href"]
        for attr in LINK_ATTRS.get(tag, ()):
            value = a.get(attr)
            if value is not None:
                self.links.append((self.getpos()[0], tag, value.strip()))

    handle_startendtag = handle_starttag


def parse(path, cache):
    if path not in cache:
        page = Page()
        with open(path, encoding="utf-8") as f:
            page.feed(f.read())
        page.close()
        cache[path] = page
    return cache[path]


def main():
    if len(sys.argv) > 2:
        print(__doc__, file=sys.stderr)
        return 2
    default = os.path.join(os.path.dirname(os.path.abspath(__file__)), "book")
    root = os.path.realpath(sys.argv[1] if len(sys.argv) == 2 else default)
    if not os.path.isdir(root):
        print(f"check-links: {root} is not a directory (build the book first)", file=sys.stderr)
        return 2

    pages = sorted(
        os.path.join(d, f)
        for d, _, files in os.walk(root)
        for f in files
        if f.endswith(".html")
    )
    cache = {}
    broken = []
    external = {}
    checked = 0
    for path in pages:
        page = parse(path, cache)
        here = os.path.relpath(path, root)
        # mdBook's 404 page has <base href="/">: its links are relative to the site root.
        base_dir = os.path.dirname(path)
        if page.base is not None and page.base.startswith("/"):
            base_dir = os.path.join(root, page.base.lstrip("/"))
        for line, tag, url in page.links:
            if not url:
                continue
            parts = urlsplit(url)
            if parts.scheme or url.startswith("//"):
                if parts.scheme not in ("javascript", "data"):
                    external.setdefault(url, []).append(f"{here}:{line}")
                continue
            checked += 1
            if parts.path:
                target = os.path.normpath(os.path.join(base_dir, unquote(parts.path)))
                if parts.path.endswith("/") or os.path.isdir(target):
                    target = os.path.join(target, "index.html")
            else:
                target = path
            if not os.path.isfile(target):
                broken.append(f"{here}:{line}: <{tag}> {url}: no file {os.path.relpath(target, root)}")
                continue
            if parts.fragment and target.endswith(".html"):
                anchor = unquote(parts.fragment)
                if anchor not in parse(target, cache).ids:
                    broken.append(
                        f"{here}:{line}: <{tag}> {url}: no id '{anchor}' in {os.path.relpath(target, root)}"
                    )

    print(f"check-links: {len(pages)} pages, {checked} relative links checked, "
          f"{len(broken)} broken; {len(external)} external links listed (not fetched)")
    for url in sorted(external):
        print(f"  external: {url} ({len(external[url])}x, first at {external[url][0]})")
    for b in broken:
        print(f"  BROKEN {b}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
