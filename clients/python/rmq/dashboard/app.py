"""The Flask application: the pages, the JSON API, /metrics and the writable actions."""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from typing import Any, Optional
from urllib.parse import urlencode

import redis
from flask import Flask, Response, abort, jsonify, redirect, render_template, request, url_for
from prometheus_client import CONTENT_TYPE_LATEST

from .._protocol import POLICY_FIELDS
from . import security, text
from .sampler import Sampler
from .source import JOURNAL_EVENTS, SERVER_ERRORS, Source, error_text, valid_name

PER_PAGE = 50
MAX_PER_PAGE = 500
DEAD_PER_PAGE = 50
#: Queue pages kept as last read, shown (marked as old) while Redis is unreachable: a few,
#: as each holds up to ~300 messages (in flight, dead, waiting, journal).
KEPT_PAGES = 8
#: RMQ.POLICY fields the policy form edits, by their wire names (paused has its own buttons).
POLICY_FORM_FIELDS = tuple(f.replace("_", "-") for f in POLICY_FIELDS if f != "paused")


def _int_arg(name: str, default: int, low: int, high: int) -> int:
    try:
        return min(high, max(low, int(request.args.get(name, default))))
    except ValueError:
        return default


def _api_message(d: dict[str, Any], key: str = "message") -> dict[str, Any]:
    return {**d, key: text.message_json(d[key])}


def _detail_json(d: dict[str, Any]) -> dict[str, Any]:
    pending = [{**_api_message(p), "group": None if p["group"] is None
                else text.message_json(p["group"])} for p in d["pending"]]
    return {**d, "name": text.show(d["name"]), "pending": pending,
            "dead": {**d["dead"], "items": [_api_message(i) for i in d["dead"]["items"]]},
            "waiting": [_api_message(w) for w in d["waiting"]],
            "schedules": None if d["schedules"] is None else [
                {**s, "name": text.show(s["name"]), "spec": text.show(s["spec"])}
                for s in d["schedules"]]}


def _entry_json(e: dict[str, Any]) -> dict[str, Any]:
    return {**e, "message": text.message_json(e["message"])}


def _row_json(r: dict[str, Any]) -> dict[str, Any]:
    return {**r, "name": r["label"],
            "url": url_for("queue_page", name=text.url_name(r["name"]))}


def create_app(source: Source, sampler: Sampler, writable: bool = False,
               auth: security.Auth = security.Auth(), listen_host: str = "127.0.0.1",
               metrics_only: bool = False) -> Flask:
    """The dashboard (or, with metrics_only, the exporter: /metrics alone)."""
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = 1 << 20
    csrf_token = secrets.token_urlsafe(32)

    app.jinja_env.filters.update(show=text.show, plain=text.is_plain, hexdump=text.hexdump,
                                 ms_time=text.ms_time, url_name=text.url_name,
                                 lag=text.lag, duration=text.duration,
                                 dash=lambda v: "–" if v is None else v)
    app.jinja_env.globals.update(writable=writable, csrf_token=csrf_token,
                                 policy_fields=POLICY_FORM_FIELDS,
                                 journal_events=JOURNAL_EVENTS)

    @app.before_request
    def guard() -> Optional[Response]:
        if not security.host_allowed(request.host, listen_host, auth):
            return Response("unexpected Host header\n", 403, mimetype="text/plain")
        if not auth.allows(request.headers.get("Authorization")):
            return Response("authentication required\n", 401, mimetype="text/plain",
                            headers={"WWW-Authenticate": 'Basic realm="RMQ dashboard"'})
        if request.method == "POST":
            if not writable:
                return Response("read-only dashboard: start it with --writable to change "
                                "queues\n", 403, mimetype="text/plain")
            why = security.csrf_refusal(
                request.form.get("csrf_token"), csrf_token, request.headers.get("Origin"),
                request.headers.get("Referer"), request.host_url)
            if why:
                return Response(f"refused: {why}\n", 403, mimetype="text/plain")
        return None

    @app.after_request
    def headers(resp: Response) -> Response:
        resp.headers.setdefault("Content-Security-Policy",
                                "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                                "frame-ancestors 'none'; form-action 'self'")
        resp.headers.setdefault("X-Content-Type-Options", "nosniff")
        resp.headers.setdefault("Referrer-Policy", "same-origin")
        return resp

    @app.get("/metrics")
    def metrics() -> Response:
        compressed = "gzip" in request.accept_encodings
        body, error = sampler.scrape(compressed)
        if error is not None or body is None:
            # a failed scrape is what tells Prometheus (`up`) that the servers went unread
            return Response(f"reading the queues failed: {error}\n", 503,
                            mimetype="text/plain")
        resp = Response(body, mimetype=CONTENT_TYPE_LATEST, headers={"Vary": "Accept-Encoding"})
        if compressed:
            resp.headers["Content-Encoding"] = "gzip"
        return resp

    if metrics_only:
        return app
    app.jinja_env.globals.update(interval=sampler.interval)
    kept: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()
    kept_lock = threading.Lock()

    def stale(figures: Optional[float]) -> Optional[dict[str, Any]]:
        """What the pages say while the servers do not answer: since when, why, and how
        old the figures shown are (None while they answer)."""
        since, error = sampler.outage()
        if since is None:
            return None
        return {"since": since, "error": error, "figures": figures,
                "age": None if figures is None else max(0.0, time.time() - figures)}

    def list_args() -> dict[str, Any]:
        return {"match": request.args.get("match", ""),
                "sort": request.args.get("sort", "name"),
                "desc": request.args.get("desc") == "1",
                "page": _int_arg("page", 1, 1, 1 << 30),
                "per_page": _int_arg("per_page", PER_PAGE, 1, MAX_PER_PAGE)}

    @app.get("/")
    def index() -> str:
        args = list_args()
        data = sampler.page(**args)

        def link(**change: Any) -> str:
            q = {**args, "desc": "1" if args["desc"] else "", **change}
            return "?" + urlencode({k: v for k, v in q.items() if v not in ("", None)})
        return render_template("index.html", data=data, args=args, link=link,
                               stale=stale(data["taken"]), msg=request.args.get("msg"),
                               error=request.args.get("error"))

    @app.get("/api/queues")
    def api_queues() -> Response:
        data = sampler.page(**list_args())
        return jsonify({**data, "queues": [_row_json(r) for r in data["queues"]]})

    @app.get("/api/history")
    def api_history() -> Response:
        return jsonify(sampler.series())

    def detail(name: str) -> dict[str, Any]:
        offset = _int_arg("dead_offset", 0, 0, 1 << 62)
        try:
            return source.queue(name, dead_offset=offset, dead_count=DEAD_PER_PAGE)
        except ValueError as e:  # a name no queue can have
            abort(400, str(e))

    @app.get("/api/queues/<path:name>")
    def api_queue(name: str) -> Response:
        return jsonify(_detail_json(detail(name)))

    def journal_args() -> dict[str, str]:
        event = request.args.get("event", "")
        return {"event": event if event in JOURNAL_EVENTS else "",
                "text": request.args.get("text", "").strip()}

    def traced() -> Optional[bytes]:
        """The message whose timeline is asked for: ?trace=TEXT, or ?trace_hex=HEX for
        bytes that are not text (the journal's links)."""
        try:
            raw = bytes.fromhex(request.args.get("trace_hex", ""))
        except ValueError:
            abort(400, "trace_hex must be hexadecimal")
        return raw or request.args.get("trace", "").encode() or None

    def checked(name: str) -> str:
        if not valid_name(name):
            abort(400, f"invalid queue name {name!r}: empty, or with {{ or }}")
        return name

    @app.get("/api/queues/<path:name>/journal")
    def api_journal(name: str) -> Response:
        j = source.journal(checked(name), **journal_args())
        return jsonify({**j, "entries": [_entry_json(e) for e in j["entries"]]})

    @app.get("/api/queues/<path:name>/trace")
    def api_trace(name: str) -> Response:
        message = traced()
        if message is None:
            abort(400, "give the message as ?trace=TEXT or ?trace_hex=HEX")
        t = source.trace(checked(name), message)
        return jsonify({**t, "events": [_entry_json(e) for e in t["events"]]})

    @app.get("/queues/<path:name>")
    def queue_page(name: str) -> Any:
        jargs, message = journal_args(), traced()
        began = time.time()
        try:
            view = {"q": detail(name), "journal": source.journal(name, **jargs),
                    "trace": None if message is None else source.trace(name, message)}
        except SERVER_ERRORS as e:
            sampler.mark_failing(error_text(e), began)
            with kept_lock:
                last = kept.get(request.full_path)
            if last is None:
                return render_template("unreachable.html", name=name,
                                       stale=stale(None)), 503
            read, view = last
        else:
            read = time.time()
            with kept_lock:
                kept[request.full_path] = (read, view)
                kept.move_to_end(request.full_path)
                while len(kept) > KEPT_PAGES:
                    kept.popitem(last=False)
        return render_template("queue.html", **view, jargs=jargs, traced=message,
                               dead_per_page=DEAD_PER_PAGE, stale=stale(read),
                               msg=request.args.get("msg"), error=request.args.get("error"))

    def act(name: str, *command: Any, done: str) -> Response:
        """Run one command on the queue and go back to its page with the outcome."""
        checked(name)
        try:
            reply = source.client.execute_command(*command)
            outcome = {"msg": done.format(reply=reply)}
        except redis.ResponseError as e:
            outcome = {"error": str(e)}
        return redirect(url_for("queue_page", name=name) + "?" + urlencode(outcome), 303)

    @app.post("/queues/<path:name>/replay")
    def replay(name: str) -> Response:
        count = request.form.get("count", "").strip()
        extra = ["COUNT", count] if count else []
        return act(name, "RMQ.REPLAY", name, *extra, done="replayed {reply} dead letter(s)")

    @app.post("/queues/<path:name>/cancel")
    def cancel(name: str) -> Response:
        try:
            message = bytes.fromhex(request.form.get("hex", ""))
        except ValueError:
            message = b""
        if not message:
            message = request.form.get("message", "").encode()
        if not message:
            abort(400, "no message given")
        return act(name, "RMQ.CANCEL", name, message, done="cancelled {reply} waiting message(s)")

    @app.post("/queues/<path:name>/pause")
    def pause(name: str) -> Response:
        return act(name, "RMQ.POLICY", name, "SET", "paused", 1, done="paused")

    @app.post("/queues/<path:name>/resume")
    def resume(name: str) -> Response:
        return act(name, "RMQ.POLICY", name, "SET", "paused", 0, done="resumed")

    @app.post("/queues/<path:name>/policy")
    def policy(name: str) -> Response:
        pairs = []
        for f in POLICY_FORM_FIELDS:
            value = request.form.get(f, "").strip()
            if value and value != request.form.get(f"was-{f}", "").strip():
                pairs += [f, value]
        if not pairs:
            return redirect(url_for("queue_page", name=name) + "?msg=nothing+changed", 303)
        return act(name, "RMQ.POLICY", name, "SET", *pairs, done="policy set")

    def confirmed(name: str) -> Optional[Response]:
        """Purge and drop run only when the form names the queue (typed by the person)."""
        typed = request.form.get("confirm", "")
        if typed in (name, text.show(name)):
            return None
        return redirect(url_for("queue_page", name=name) + "?" + urlencode(
            {"error": "type the queue's name to confirm: nothing was removed"}), 303)

    @app.post("/queues/<path:name>/purge")
    def purge(name: str) -> Response:
        dead = request.form.get("dead") == "1"
        refused = confirmed(checked(name))
        if refused:
            return refused
        return act(name, "RMQ.PURGE", name, *(["DEAD"] if dead else []),
                   done="purged {reply} message(s)" + (", dead letters included" if dead
                                                       else ""))

    @app.post("/queues/<path:name>/drop")
    def drop(name: str) -> Response:
        refused = confirmed(checked(name))
        if refused:
            return refused
        try:
            reply = source.client.execute_command("RMQ.DROP", name)
        except redis.ResponseError as e:
            return redirect(url_for("queue_page", name=name) + "?" + urlencode(
                {"error": str(e)}), 303)
        shown = text.show(name)
        outcome = f"dropped queue {shown}" if reply else f"queue {shown} had nothing to drop"
        return redirect(url_for("index") + "?" + urlencode({"msg": outcome}), 303)

    @app.post("/queues/<path:name>/policy-reset")
    def policy_reset(name: str) -> Response:
        return act(name, "RMQ.POLICY", name, "RESET", done="policy reset ({reply})")

    return app
