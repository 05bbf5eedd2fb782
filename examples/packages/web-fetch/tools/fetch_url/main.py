"""web-fetch.fetch_url: fetches one page from the allowed hosts and returns its text.

Uses urllib only. The host is checked against the same allowlist the package declares
(the sandbox enforces it too), redirects to other hosts are refused, at most 2 MB is read,
and HTML is reduced to its title and visible text.
"""

import html.parser
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

ALLOWED = ("example.com", "*.wikipedia.org")
MAX_BYTES = 2 * 1024 * 1024
TIMEOUT = 15
USER_AGENT = "quiver-web-fetch/1.0 (+https://github.com/quiver-rs/quiver)"


class ToolError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def host_allowed(host):
    host = (host or "").lower().rstrip(".")
    for pattern in ALLOWED:
        if pattern.startswith("*."):
            if host.endswith(pattern[1:]) and len(host) > len(pattern) - 1:
                return True
        elif host == pattern:
            return True
    return False


def check_url(url):
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ToolError("bad_scheme", "only http and https URLs can be fetched")
    if parts.username or parts.password or parts.port not in (None, 80, 443):
        raise ToolError("bad_url", "URLs with credentials or unusual ports are not allowed")
    if not host_allowed(parts.hostname):
        raise ToolError(
            "host_not_allowed",
            f"`{parts.hostname}` 不在允许的网站里 · is not an allowed host; allowed: {', '.join(ALLOWED)}",
        )
    return parts


class NoForeignRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        check_url(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class TextExtractor(html.parser.HTMLParser):
    SKIP = {"script", "style", "noscript", "template", "svg", "head"}
    BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "table"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.title = ""
        self.parts = []
        self.skip_depth = 0
        self.in_title = False

    def handle_starttag(self, tag, attrs):
        if tag == "title":
            self.in_title = True
        elif tag in self.SKIP:
            self.skip_depth += 1
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag == "title":
            self.in_title = False
        elif tag in self.SKIP and self.skip_depth:
            self.skip_depth -= 1
        elif tag in self.BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if self.in_title:
            self.title += data
        elif not self.skip_depth:
            self.parts.append(data)

    def text(self):
        lines = (" ".join(line.split()) for line in "".join(self.parts).splitlines())
        return "\n".join(line for line in lines if line)


def fetch(url, max_chars):
    parts = check_url(url)
    opener = urllib.request.build_opener(NoForeignRedirects)
    request = urllib.request.Request(parts.geturl(), headers={"User-Agent": USER_AGENT})
    try:
        with opener.open(request, timeout=TIMEOUT) as response:
            body = response.read(MAX_BYTES + 1)
            status = response.status
            final_url = response.geturl()
            content_type = response.headers.get_content_type()
            charset = response.headers.get_content_charset() or "utf-8"
    except urllib.error.HTTPError as err:
        raise ToolError("http_error", f"the server answered {err.code} {err.reason}") from None
    except urllib.error.URLError as err:
        reason = err.reason
        if isinstance(reason, ToolError):
            raise reason from None
        raise ToolError("unreachable", f"cannot reach {parts.hostname}: {reason}") from None
    except TimeoutError:
        raise ToolError("timeout", f"no answer from {parts.hostname} within {TIMEOUT} s") from None
    body = body[:MAX_BYTES]
    text = body.decode(charset, errors="replace")
    title = ""
    if content_type in ("text/html", "application/xhtml+xml"):
        extractor = TextExtractor()
        extractor.feed(text)
        title, text = " ".join(extractor.title.split()), extractor.text()
    elif not content_type.startswith("text/") and content_type not in ("application/json", "application/xml"):
        raise ToolError("not_text", f"`{content_type}` is not a text page")
    truncated = len(text) > max_chars
    return {
        "url": final_url,
        "status": status,
        "content_type": content_type,
        "title": title,
        "text": text[:max_chars],
        "truncated": truncated,
        "length": len(text),
    }


def main():
    try:
        request = json.load(sys.stdin)
        arguments = request.get("arguments") or {}
        url = str(arguments.get("url", "")).strip()
        if not url:
            raise ToolError("missing_url", "`url` is required")
        max_chars = int(arguments.get("max_chars", 4000))
        if not 100 <= max_chars <= 20000:
            raise ToolError("bad_max_chars", "`max_chars` must be between 100 and 20000")
        result = fetch(url, max_chars)
    except ToolError as err:
        json.dump({"error": str(err), "code": err.code}, sys.stdout, ensure_ascii=False)
        return 1
    except (ValueError, TypeError, AttributeError) as err:
        json.dump({"error": f"bad request: {err}", "code": "bad_request"}, sys.stdout)
        return 1
    json.dump(result, sys.stdout, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
