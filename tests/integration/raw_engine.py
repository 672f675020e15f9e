"""A raw-socket engine on 127.0.0.1 whose every byte a test scripts (stream lies, stalls, 429s,
/metrics garbage, legal framings such as an HTTP/1.0 body or a UTF-8 character split across
TCP writes). Not the product's emulator: each answer is a list of writes, ``bytes`` sent as they
are (one TCP write each, TCP_NODELAY) or a ``float`` to sleep that many seconds.

Prompt tokens are counted as the prompt's words plus ``TEMPLATE``, so the client's server-mode
calibration reaches any size exactly."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TEMPLATE = 7
Write = bytes | float
#: (request body, chat request number) -> the writes of the answer
ChatScript = Callable[[dict[str, Any], int], list[Write]]
#: scrape number -> the writes of the answer
MetricsScript = Callable[[int], list[Write]]


def prompt_tokens(body: dict[str, Any]) -> int:
    return len(body["messages"][-1]["content"].split()) + TEMPLATE


def chunk(model: str, delta: Any, finish: str | None = None, index: int = 0) -> dict[str, Any]:
    return {
        "id": "chatcmpl-raw",
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
    }


def stream_events(body: dict[str, Any], model: str | None = None) -> list[bytes]:
    """The ``data:`` payloads of a well-behaved stream: role chunk, one token per chunk, a
    usage chunk, ``[DONE]``."""
    m = model or body["model"]
    n = int(body["max_tokens"])
    out = [chunk(m, {"role": "assistant", "content": ""})]
    out += [chunk(m, {"content": f" w{i}"}, "length" if i == n - 1 else None) for i in range(n)]
    usage = {"prompt_tokens": prompt_tokens(body), "completion_tokens": n, "total_tokens": 0}
    out.append({"id": "chatcmpl-raw", "model": m, "choices": [], "usage": usage})
    return [json.dumps(o).encode() for o in out] + [b"[DONE]"]


def sse(events: list[bytes], gap_s: float = 0.002) -> list[Write]:
    """A chunked text/event-stream answer, one HTTP chunk per event."""
    out: list[Write] = [
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    ]
    for e in events:
        data = b"data: " + e + b"\n\n"
        out.append(b"%x\r\n%s\r\n" % (len(data), data))
        if gap_s:
            out.append(gap_s)
    out.append(b"0\r\n\r\n")
    return out


def answer(
    status: int, body: bytes, ctype: str = "application/json", **headers: str
) -> list[Write]:
    extra = "".join(f"{k.replace('_', '-')}: {v}\r\n" for k, v in headers.items())
    head = (
        f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
        f"{extra}\r\n"
    )
    return [head.encode() + body]


def vllm_metrics(drafts: float, draft_tokens: float, accepted: float, model: str) -> str:
    labels = f'{{engine="0",model_name="{model}"}}'
    return (
        "# TYPE vllm:spec_decode_num_drafts_total counter\n"
        f"vllm:spec_decode_num_drafts_total{labels} {drafts}\n"
        f"vllm:spec_decode_num_draft_tokens_total{labels} {draft_tokens}\n"
        f"vllm:spec_decode_num_accepted_tokens_total{labels} {accepted}\n"
    )


@dataclass
class RawEngine:
    model: str = "test-model"
    chat: ChatScript = field(default=lambda body, n: sse(stream_events(body)))
    metrics: MetricsScript | None = None
    models_script: Callable[[int], list[Write]] | None = None
    chats: int = 0
    scrapes: int = 0
    model_calls: int = 0
    #: counters a default /metrics answer reports: per measured request of N tokens,
    #: N-1 drafts of 3 tokens with 2 accepted
    counters: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])

    def __post_init__(self) -> None:
        engine = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                engine._handle(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> RawEngine:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handle(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = b""
        while b"\r\n\r\n" not in data:
            got = sock.recv(65536)
            if not got:
                return
            data += got
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path = lines[0].split(" ")[:2]
        length = 0
        for line in lines[1:]:
            if line.lower().startswith("content-length:"):
                length = int(line.split(":", 1)[1])
        while len(rest) < length:
            rest += sock.recv(65536)
        writes = self._route(method, path, json.loads(rest) if length else {})
        try:
            for w in writes:
                if isinstance(w, bytes):
                    sock.sendall(w)
                else:
                    time.sleep(w)
        except OSError:
            pass

    def _route(self, method: str, path: str, body: dict[str, Any]) -> list[Write]:
        if path == "/v1/models":
            self.model_calls += 1
            if self.models_script is not None:
                return self.models_script(self.model_calls)
            listing = {"object": "list", "data": [{"id": self.model, "object": "model"}]}
            return answer(200, json.dumps(listing).encode())
        if path == "/metrics":
            self.scrapes += 1
            if self.metrics is not None:
                return self.metrics(self.scrapes)
            d, t, a = self.counters
            return answer(200, vllm_metrics(d, t, a, self.model).encode(), "text/plain")
        if path == "/v1/chat/completions" and method == "POST":
            self.chats += 1
            n = int(body["max_tokens"])
            if n > 1:
                self.counters[0] += n - 1
                self.counters[1] += 3 * (n - 1)
                self.counters[2] += 2 * (n - 1)
            return self.chat(body, self.chats)
        return answer(404, b"{}")
