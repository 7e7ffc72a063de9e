"""Every route of the installed Gradio that takes a session hash or an event id, where it carries it, and the
method it answers; :func:`match` finds the route a request reaches. :mod:`copilot.ui.sessions` guards them, and a
test enumerates the installed Gradio's routes and fails when one is missing here."""

from __future__ import annotations

import re

API = "/gradio_api"
QUERY, PATH, BODY, HEADER, EVENT, BODY_EVENT, OFF = "query", "path", "body", "header", "event", "body+event", "off"
GET, POST = "GET", "POST"

# Route template (as the installed Gradio declares it) -> where the session hash or event id travels, and the
# method the route answers (a template is matched only with its method: GET /call/v2/<id> is Gradio's
# /call/{api_name}/{event_id}, not the POST-only /call/v2/{api_name}).
SESSION_ROUTES: dict[str, tuple[str, str]] = {
    f"{API}/deep_link": (OFF, GET),
    f"{API}/queue/data": (QUERY, GET),
    f"{API}/heartbeat/{{session_hash}}": (PATH, GET),
    f"{API}/stream/{{session_hash}}/{{run}}/{{component_id}}/playlist.m3u8": (PATH, GET),
    f"{API}/stream/{{session_hash}}/{{run}}/{{component_id}}/{{segment_id}}.{{ext}}": (PATH, GET),
    f"{API}/stream/{{session_hash}}/{{run}}/{{component_id}}/playlist-file": (PATH, GET),
    f"{API}/queue/join": (BODY, POST),
    f"{API}/cancel": (BODY_EVENT, POST),
    f"{API}/component_server": (BODY, POST),
    f"{API}/component_server/": (BODY, POST),
    f"{API}/api/{{api_name}}": (BODY, POST),
    f"{API}/api/{{api_name}}/": (BODY, POST),
    f"{API}/run/{{api_name}}": (BODY, POST),
    f"{API}/run/{{api_name}}/": (BODY, POST),
    f"{API}/call/{{api_name}}": (BODY, POST),
    f"{API}/call/{{api_name}}/": (BODY, POST),
    f"{API}/call/v2/{{api_name}}": (BODY, POST),
    f"{API}/call/v2/{{api_name}}/": (BODY, POST),
    f"{API}/upload": (HEADER, POST),
    f"{API}/call/{{api_name}}/{{event_id}}": (EVENT, GET),
    f"{API}/call/v2/{{api_name}}/{{event_id}}": (EVENT, GET),
    f"{API}/stream/{{event_id}}": (EVENT, POST),
    f"{API}/stream/{{event_id}}/close": (EVENT, POST),
    f"{API}/reset": (EVENT, POST),
    f"{API}/reset/": (EVENT, POST),
}


def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[a-z_]+\})", template)
    regex = "".join(f"(?P<{p[1:-1]}>[^/]+?)" if p.startswith("{") else re.escape(p) for p in parts)
    return re.compile(f"^{regex}$")


# Fewer placeholders first, so that a literal part wins over a placeholder (/call/v2/{api_name} for a POST).
_ROUTES = sorted(((_pattern(t), t, where, method) for t, (where, method) in SESSION_ROUTES.items()),
                 key=lambda route: (route[1].count("{"), -len(route[1])))


def match(path: str, method: str = GET) -> tuple[str, str, dict[str, str]] | None:
    """The session route a ``method`` request to ``path`` reaches, with where it carries its key and the path's
    named parts; None if none. HEAD is read as GET."""
    method = GET if method == "HEAD" else method
    for pattern, template, where, allowed in _ROUTES:
        if allowed != method:
            continue
        found = pattern.match(path)
        if found:
            return template, where, found.groupdict()
    return None
