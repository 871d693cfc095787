"""Schemathesis hooks of .ci/schemathesis (loaded through .ci/schemathesis.toml).

Three kinds of failure that are no fault of the server are dropped, each for a
stated reason (`filter_failure`):

- `ensure_resource_availability` holds that what a POST made is found by the
  operations its answer links to. Two are absent by design: a scheduled
  message is read as 404 until it falls due, and a message's feedback
  exists only once the user gives it (ABSENT_BY_DESIGN).

- `positive_data_acceptance` holds that a request the document calls valid is
  never refused as malformed (400). A few refusals depend not on the request's
  shape but on what the server holds or on the clock, which no JSON Schema can
  state (the document says them in words): STATE_REFUSALS.
  And in stateful runs, schemathesis feeds a value seen in one response to
  another operation's parameter (a member's `id` to a `workspace_id`, say)
  without checking it against that parameter's schema (a member's `userId`
  to the events list's `userId` filter): a request whose path or query does
  not keep to the document is not held against the server.
- `negative_data_rejection` holds that a request the document calls invalid is
  refused. Query values travel as strings, and unknown query parameters are
  ignored (the contract says so), so some invalid queries that schemathesis
  makes (null or a number for a string, a string for an array of one, an
  extra parameter) reach the server as valid ones: a request whose query, as
  sent, keeps to the document is not held against the server.

And the objects that the other operations act on (the demo bot, its file, its
conversation, its chat user and their taking part in that conversation) are
not deleted or repointed mid-run (`filter_case`): schemathesis
reuses ids that it saw in responses. An `Idempotency-Key` that keeps to the
document is made unique to its case (`map_case`): schemathesis draws the same
few keys again and again, and the server would answer a second request 422
(the key's first request was another) or with the first answer, never trying
it. Replays are tests/test_idempotency.py's to test.
"""

import itertools
import json
import os
import re
import time
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import jsonschema_rs
import schemathesis
from schemathesis.core.failures import AcceptedNegativeData
from schemathesis.core.parameters import ParameterLocation
from schemathesis.openapi.checks import EnsureResourceAvailability, RejectedPositiveData
from ulid import ULID

# (operationId or None for any, error type, pattern of its message, why).
STATE_REFUSALS: list[tuple[str | None, str, str, str]] = [
    (None, "ReferenceNotFound", "", "the request names an object that does not exist"),
    (None, "InvalidQuery", r"^nextToken ", "a nextToken the server did not issue for this list"),
    (None, "InvalidPayload", r"expiresAt: Must be in the future", "a date in the past"),
    (
        "cancelScheduledEvent",
        "InvalidPayload",
        r"only a scheduled event can be canceled",
        "the event exists but is no longer scheduled",
    ),
    (
        "getOrCreateMessage",
        "InvalidPayload",
        r"^payload: Required when no message matches",
        "no message matches the tags, so a payload is needed",
    ),
    ("getBotLogs", "InvalidQuery", r"timeStart: Must not be after timeEnd", "an order of values"),
    (
        "setFilePassages",
        "InvalidPayload",
        r"Two passages have the same meta\.position",
        "distinct values among items",
    ),
    (
        "updateFileMetadata",
        "InvalidPayload",
        r"^tags: At most \d+ tags",
        "the tags given, added to those the file has",
    ),
    (
        "uploadFileContent",
        "InvalidPayload",
        "",
        "bytes other than the size or type that the file announced",
    ),
    *(
        (
            operation,
            "InvalidPayload",
            r"^(tags|properties|attributes): At most \d+ tags",
            "the keys given, added to those the object has",
        )
        for operation in ("updateUser", "updateConversation", "updateMessage")
    ),
    (
        "updateMessage",
        "InvalidPayload",
        r"^payload",
        "a payload of the type the message has, which the document cannot say",
    ),
    (
        "chatUpdateMessage",
        "InvalidPayload",
        r"^payload",
        "a payload of the type the message has, which the document cannot say",
    ),
    (
        "chatUpdateUser",
        "InvalidPayload",
        r"^userData: (The token|At most)",
        "a token signed with the chat's key (and its claims' size), which no schema can state",
    ),
]


def _operation_id(case: Any) -> str | None:
    return case.operation.definition.raw.get("operationId")


def _refused_for_state(case: Any, response: Any) -> bool:
    if response.status_code != 400:
        return False
    try:
        body = response.json()
    except ValueError:
        return False
    if not isinstance(body, dict):
        return False
    operation_id = _operation_id(case)
    return any(
        (operation is None or operation == operation_id)
        and body.get("type") == error_type
        and re.search(pattern, str(body.get("message", ""))) is not None
        for operation, error_type, pattern, _ in STATE_REFUSALS
    )


def _query_as_sent(url: str, parameters: list[dict[str, Any]]) -> dict[str, Any]:
    """The documented query parameters of `url` as the server reads them
    (Django's QueryDict: the last of repeated values, unless a list)."""
    pairs = parse_qsl(urlsplit(url).query, keep_blank_values=True)
    values: dict[str, Any] = {}
    for parameter in parameters:
        name, schema = parameter["name"], parameter.get("schema", {})
        found: Any
        if parameter.get("style") == "deepObject":
            prefix = f"{name}["
            found = {
                key[len(prefix) : -1]: value
                for key, value in pairs
                if key.startswith(prefix) and key.endswith("]")
            }
        else:
            sent = [value for key, value in pairs if key == name]
            found = sent if schema.get("type") == "array" else (sent[-1] if sent else None)
            if isinstance(found, str) and schema.get("type") == "integer":
                found = int(found) if found.isascii() and found.isdigit() else found
        if found or found == "":
            values[name] = found
    for parameter in parameters:
        # A parameter the server does not read beside another (pageSize beside limit).
        if parameter.get("x-ignored-with") in values:
            values.pop(parameter["name"], None)
    return values


def _query_is_valid_as_sent(case: Any, response: Any) -> bool:
    meta = case.meta
    if meta is None or any(
        meta.is_negative_at(location)
        for location in (ParameterLocation.PATH, ParameterLocation.HEADER, ParameterLocation.BODY)
    ):
        return False
    return _query_keeps_to_document(case, response, complete=True)


def _query_keeps_to_document(case: Any, response: Any, *, complete: bool) -> bool:
    """Every query parameter as sent keeps to its schema (and, `complete`,
    every required one was sent)."""
    parameters = [
        parameter
        for parameter in case.operation.definition.raw.get("parameters", [])
        if parameter.get("in") == "query"
    ]
    sent = _query_as_sent(response.request.url, parameters)
    for parameter in parameters:
        name = parameter["name"]
        if name not in sent:
            if complete and parameter.get("required"):
                return False
            continue
        if not jsonschema_rs.validator_for(parameter.get("schema", {})).is_valid(sent[name]):
            return False
    return True


def _path_keeps_to_document(case: Any) -> bool:
    values = case.path_parameters or {}
    for parameter in case.operation.definition.raw.get("parameters", []):
        name = parameter.get("name")
        if parameter.get("in") != "path" or name not in values:
            continue
        if not jsonschema_rs.validator_for(parameter.get("schema", {})).is_valid(values[name]):
            return False
    return True


# (operationId, pattern of the 404's message, why): an object made by one
# operation that another answers 404 by design (the contract says so).
ABSENT_BY_DESIGN: list[tuple[str, str, str]] = [
    (
        "chatRemoveMessageFeedback",
        r"^The user gave no feedback",
        "the message was made; its feedback exists only once the user gives it",
    ),
]


def _scheduled_message(case: Any) -> bool:
    """A message id whose ULID time is still to come: a scheduled message,
    which is in no list and read as 404 until it falls due (its id is a ULID
    of that time)."""
    message_id = str((case.path_parameters or {}).get("message_id", ""))
    prefix, _, ulid = message_id.partition("_")
    try:
        due = ULID.from_str(ulid).timestamp
    except ValueError:
        return False
    return prefix == "msg" and due > time.time()


def _absent_by_design(case: Any, response: Any) -> bool:
    if response.status_code != 404:
        return False
    try:
        message = str(response.json().get("message", ""))
    except (ValueError, AttributeError):
        return False
    operation_id = _operation_id(case)
    return _scheduled_message(case) or any(
        operation == operation_id and re.search(pattern, message) is not None
        for operation, pattern, _ in ABSENT_BY_DESIGN
    )


def _dropped(failure: Any, case: Any, response: Any) -> bool:
    if isinstance(failure, EnsureResourceAvailability):
        return _absent_by_design(case, response)
    if isinstance(failure, RejectedPositiveData):
        return (
            _refused_for_state(case, response)
            or not _path_keeps_to_document(case)
            or not _query_keeps_to_document(case, response, complete=False)
        )
    if isinstance(failure, AcceptedNegativeData):
        return _query_is_valid_as_sent(case, response)
    return False


# SCHEMATHESIS_DROPPED_LOG names a file that lists each dropped failure.
_DROPPED_LOG = os.environ.get("SCHEMATHESIS_DROPPED_LOG")


@schemathesis.hook
def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    if not _dropped(failure, case, response):
        return True
    if _DROPPED_LOG:
        with open(_DROPPED_LOG, "a") as log:
            log.write(
                f"{type(failure).__name__}\t{_operation_id(case)}\t{response.status_code}"
                f"\t{response.request.url}\t{response.text[:300]!r}\n"
            )
    return False


def _protected() -> dict[str, dict[str, set[str]]]:
    """The path ids that operations must not delete or change, by operationId:
    a case is dropped when each path parameter named holds one of its ids."""
    demo = json.load(open(os.environ["DEMO_JSON"]))
    bot = {"bot_id": {demo["botId"]}}
    # The demo's chat ids are runtime ids too (its user and conversation chose none).
    conversation = {"conversation_id": {demo["conversationId"]}}
    user = {"user_id": {demo["userId"]}}
    return {
        "deleteBot": bot,
        # Its webhook URL stays where the worker delivers.
        "updateBot": bot,
        "deleteFile": {"file_id": {demo["fileId"], demo["fileKey"]}},
        "chatDeleteConversation": conversation,
        "deleteConversation": conversation,
        # The user of the demo's chat key, whom the chat operations act as.
        "deleteUser": user,
        # ... and who stays in the demo conversation, for them to reach it.
        "removeParticipant": {**conversation, **user},
    }


PROTECTED = _protected()


@schemathesis.hook
def filter_case(context: Any, case: Any) -> bool:
    protected = PROTECTED.get(_operation_id(case) or "")
    if protected is None:
        return True
    values = case.path_parameters or {}
    return not all(values.get(name) in ids for name, ids in protected.items())


# Keys the document takes (printable ASCII, no surrounding space, 1 to 255).
IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]{0,253}[\x21-\x7e])?")
_case_keys = itertools.count()


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    headers = case.headers or {}
    for name, value in headers.items():
        if name.lower() == "idempotency-key" and isinstance(value, str):
            if IDEMPOTENCY_KEY.fullmatch(value):
                headers[name] = f"schemathesis-{next(_case_keys)}"
    return case
