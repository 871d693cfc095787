"""uvicorn's HTTP protocol (httptools), but a request that it refuses itself,
before the application sees it, gets the contract's error body where
uvicorn answers `text/plain`: a request line, header or Content-Length
that does not parse (raw bytes in the target, `Content-Length: abc`, two
Content-Lengths, …). platform_site/Procfile selects it with
`--http platform_site.http_protocol:HttpToolsProtocol`."""

import json

from uvicorn.protocols.http import httptools_impl

from platform_site.api import errors
from platform_site.api.exception_handler import error_body, log_client_error

MALFORMED = "The HTTP request is malformed: its request line, a header or Content-Length"


class HttpToolsProtocol(httptools_impl.HttpToolsProtocol):
    def send_400_response(self, msg: str) -> None:
        # uvicorn's own answer, with the error body in place of `msg` (the
        # same text whatever the fault; llhttp's reason stays in the parser).
        error = errors.InvalidPayload(MALFORMED)
        error_id = errors.new_error_id()
        log_client_error(error_id, error)
        body = json.dumps(error_body(error, error_id), separators=(",", ":")).encode()
        content = [httptools_impl.STATUS_LINE[400]]
        for name, value in self.server_state.default_headers:
            content += [name, b": ", value, b"\r\n"]
        content += [
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"connection: close\r\n",
            b"\r\n",
            body,
        ]
        self.transport.write(b"".join(content))
        self.transport.close()
