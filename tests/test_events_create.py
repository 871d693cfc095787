"""POST /v1/chat/events: the response shape, schedules, validation and references."""

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from events.models import Event
from platform_site.foundation.ids import is_id, new_id
from tests.conftest import assert_error
from tests.factories import (
    BotFactory,
    ConversationFactory,
    InstallationFactory,
    MessageFactory,
    UserFactory,
    WorkflowFactory,
)

pytestmark = pytest.mark.django_db

URL = "/v1/chat/events"
TIMESTAMP_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
BASE_KEYS = {"id", "createdAt", "type", "payload", "status", "failureReason"}


def post(client: Any, body: Any, **extra: Any) -> Any:
    return client.post(URL, body, format="json", **extra)


def assert_refused(client: Any, body: Any, status: int, error_type: str, **extra: Any) -> dict:
    """The request fails with this error and writes no event."""
    before = Event.objects.count()
    response = post(client, body, **extra)
    error = assert_error(response, status, error_type)
    assert Event.objects.count() == before
    return error


def event_of(response: Any) -> dict[str, Any]:
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"event"}
    return body["event"]


# --- success -------------------------------------------------------------------------


def test_create_answers_201_with_the_exact_event_shape(runtime_client, bot):
    before = timezone.now()
    response = post(runtime_client(), {"type": "order.created", "payload": {"a": [1, {"b": None}]}})
    after = timezone.now()
    event = event_of(response)

    assert set(event) == BASE_KEYS
    assert event["id"].startswith("evt_")
    assert 28 <= len(event["id"]) <= 36
    assert is_id(event["id"], "evt")
    assert TIMESTAMP_RE.fullmatch(event["createdAt"]), event["createdAt"]
    assert event["type"] == "order.created"
    assert event["payload"] == {"a": [1, {"b": None}]}
    assert event["status"] == "pending"
    assert event["failureReason"] is None

    row = Event.objects.get(id=event["id"])
    assert row.bot_id == bot.id
    assert row.status == "pending"
    assert row.type == "order.created"
    assert row.payload == {"a": [1, {"b": None}]}
    assert row.conversation_id is None
    assert row.user_id is None
    assert row.message_id is None
    assert row.workflow_id is None
    assert row.integration_id is None
    assert before <= row.created_at <= after
    assert before <= row.due_at <= after
    created = datetime.strptime(event["createdAt"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert created == row.created_at.replace(microsecond=row.created_at.microsecond // 1000 * 1000)


def test_create_ids_are_unique_and_sort_by_creation(runtime_client):
    client = runtime_client()
    ids = [event_of(post(client, {"type": "t", "payload": {}}))["id"] for _ in range(3)]
    assert len(set(ids)) == 3
    assert Event.objects.count() == 3


def test_empty_payload_object_is_accepted(runtime_client):
    event = event_of(post(runtime_client(), {"type": "t", "payload": {}}))
    assert event["payload"] == {}


def test_schedule_with_delay_is_scheduled_and_due_after_the_delay(runtime_client):
    before = timezone.now()
    response = post(runtime_client(), {"type": "t", "payload": {}, "schedule": {"delay": 90_000}})
    after = timezone.now()
    event = event_of(response)
    assert event["status"] == "scheduled"
    assert set(event) == BASE_KEYS
    row = Event.objects.get(id=event["id"])
    assert row.status == "scheduled"
    assert before + timedelta(seconds=90) <= row.due_at <= after + timedelta(seconds=90)


def test_schedule_with_delay_zero_is_accepted(runtime_client):
    before = timezone.now()
    event = event_of(post(runtime_client(), {"type": "t", "payload": {}, "schedule": {"delay": 0}}))
    assert event["status"] == "pending"
    row = Event.objects.get(id=event["id"])
    assert before <= row.due_at <= timezone.now()


def test_schedule_delay_given_as_integral_float_is_an_integer(runtime_client):
    # JSON has one number type: 1000.0 is the integer 1000 for a JavaScript client.
    before = timezone.now()
    event = event_of(
        post(runtime_client(), {"type": "t", "payload": {}, "schedule": {"delay": 1000.0}})
    )
    row = Event.objects.get(id=event["id"])
    assert before + timedelta(seconds=1) <= row.due_at <= timezone.now() + timedelta(seconds=1)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2030-01-02T03:04:05.678+02:00", datetime(2030, 1, 2, 1, 4, 5, 678000, tzinfo=UTC)),
        ("2030-01-02T03:04:05.678Z", datetime(2030, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)),
        ("2030-06-30T23:30:00-05:30", datetime(2030, 7, 1, 5, 0, 0, tzinfo=UTC)),
    ],
)
def test_schedule_with_datetime_is_scheduled_at_that_moment(runtime_client, value, expected):
    response = post(runtime_client(), {"type": "t", "payload": {}, "schedule": {"dateTime": value}})
    event = event_of(response)
    assert event["status"] == "scheduled"
    row = Event.objects.get(id=event["id"])
    assert row.status == "scheduled"
    assert row.due_at == expected


def test_schedule_with_datetime_in_the_past_is_accepted(runtime_client):
    response = post(
        runtime_client(),
        {"type": "t", "payload": {}, "schedule": {"dateTime": "2001-02-03T04:05:06.000Z"}},
    )
    event = event_of(response)
    # Due at once, so not "scheduled" (which API.md defines as not yet due).
    assert event["status"] == "pending"
    row = Event.objects.get(id=event["id"])
    assert row.status == "pending"
    assert row.due_at == datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert row.due_at <= timezone.now()


@pytest.mark.parametrize(
    "value",
    [
        # Valid ISO 8601 with a timezone, but the instant in UTC is outside the
        # years 1 to 9999 that the application (Python) can represent.
        "0001-01-01T00:00:00+14:00",
        "9999-12-31T23:59:59-14:00",
    ],
)
def test_schedule_datetime_outside_representable_range_is_never_500(runtime_client, value):
    before = Event.objects.count()
    response = post(runtime_client(), {"type": "t", "payload": {}, "schedule": {"dateTime": value}})
    assert response.status_code != 500, response.content
    if response.status_code == 201:
        # Accepted: then the stored row must be usable by the rest of the system.
        row = Event.objects.get(id=response.json()["event"]["id"])
        assert row.due_at is not None
    else:
        assert_error(response, 400, "InvalidPayload")
        assert Event.objects.count() == before


@pytest.mark.parametrize("length", [1, 200])
def test_type_of_1_and_200_characters_is_accepted(runtime_client, length):
    event = event_of(post(runtime_client(), {"type": "x" * length, "payload": {}}))
    assert event["type"] == "x" * length
    assert Event.objects.get(id=event["id"]).type == "x" * length


# --- invalid schedules --------------------------------------------------------------


@pytest.mark.parametrize(
    "schedule",
    [
        pytest.param({}, id="neither"),
        pytest.param({"dateTime": "2030-01-01T00:00:00Z", "delay": 1000}, id="both"),
        pytest.param({"dateTime": "tomorrow"}, id="malformed-datetime"),
        pytest.param({"dateTime": "2030-13-01T00:00:00Z"}, id="month-13"),
        pytest.param({"dateTime": ""}, id="empty-datetime"),
        pytest.param({"dateTime": "2030-01-02T03:04:05"}, id="datetime-without-timezone"),
        pytest.param({"dateTime": "2030-01-02"}, id="date-only"),
        pytest.param({"dateTime": 1893456000000}, id="datetime-number"),
        pytest.param({"dateTime": None}, id="datetime-null"),
        pytest.param({"delay": -1}, id="negative-delay"),
        pytest.param({"delay": 1.5}, id="float-delay"),
        pytest.param({"delay": "1000"}, id="string-delay"),
        pytest.param({"delay": True}, id="bool-delay"),
        pytest.param({"delay": None}, id="null-delay"),
        pytest.param({"delay": 10**30}, id="huge-delay"),
        pytest.param({"delay": 10**15}, id="delay-past-year-9999"),
        pytest.param({"delay": 1e20}, id="huge-float-delay"),
        pytest.param({"delay": 1000, "repeat": True}, id="unknown-field"),
        pytest.param("in 5 minutes", id="string"),
        pytest.param([{"delay": 1000}], id="list"),
        pytest.param(1000, id="number"),
    ],
)
def test_invalid_schedule_is_400_invalid_payload(runtime_client, schedule):
    assert_refused(
        runtime_client(), {"type": "t", "payload": {}, "schedule": schedule}, 400, "InvalidPayload"
    )


# --- invalid bodies -----------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"type": "", "payload": {}}, id="type-empty"),
        pytest.param({"type": "x" * 201, "payload": {}}, id="type-201"),
        pytest.param({"type": 5, "payload": {}}, id="type-number"),
        pytest.param({"type": None, "payload": {}}, id="type-null"),
        pytest.param({"type": ["t"], "payload": {}}, id="type-list"),
        pytest.param({"type": "t", "payload": []}, id="payload-list"),
        pytest.param({"type": "t", "payload": "x"}, id="payload-string"),
        pytest.param({"type": "t", "payload": 1}, id="payload-number"),
        pytest.param({"type": "t", "payload": None}, id="payload-null"),
        pytest.param({"type": "t", "payload": True}, id="payload-bool"),
        pytest.param({"payload": {}}, id="missing-type"),
        pytest.param({"type": "t"}, id="missing-payload"),
        pytest.param({}, id="empty-object"),
        pytest.param({"type": "t", "payload": {}, "extra": 1}, id="unknown-field"),
        pytest.param({"type": "t", "payload": {}, "id": "evt_x"}, id="unknown-field-id"),
        pytest.param({"type": "t", "payload": {}, "conversationId": 12345}, id="ref-number"),
        pytest.param({"type": "t", "payload": {}, "userId": None}, id="ref-null"),
        pytest.param([{"type": "t", "payload": {}}], id="body-list"),
        pytest.param("t", id="body-string"),
    ],
)
def test_invalid_body_is_400_invalid_payload(runtime_client, body):
    assert_refused(runtime_client(), body, 400, "InvalidPayload")


def test_invalid_payload_error_message_names_the_field(runtime_client):
    error = assert_refused(
        runtime_client(), {"type": "t", "payload": {}, "bogus": 1}, 400, "InvalidPayload"
    )
    assert "bogus" in error["message"]


REFERENCE_FIELDS = ["conversationId", "userId", "messageId", "workflowId"]


@pytest.mark.parametrize("field", REFERENCE_FIELDS)
@pytest.mark.parametrize("length", [27, 37])
def test_reference_of_wrong_length_is_400_invalid_payload(runtime_client, field, length):
    value = ("conv_" + "0" * 40)[:length]
    assert len(value) == length
    assert_refused(
        runtime_client(), {"type": "t", "payload": {}, field: value}, 400, "InvalidPayload"
    )


# --- references ---------------------------------------------------------------------


def _foreign_reference(field: str) -> str:
    other = BotFactory()
    if field == "conversationId":
        return ConversationFactory(bot=other).id
    if field == "userId":
        return UserFactory(bot=other).id
    if field == "messageId":
        return MessageFactory(conversation=ConversationFactory(bot=other)).id
    return WorkflowFactory(bot=other).id


_PREFIXES = {"conversationId": "conv", "userId": "user", "messageId": "msg", "workflowId": "wf"}


@pytest.mark.parametrize("field", REFERENCE_FIELDS)
def test_reference_to_another_bots_object_is_reference_not_found(runtime_client, field):
    value = _foreign_reference(field)
    error = assert_refused(
        runtime_client(), {"type": "t", "payload": {}, field: value}, 400, "ReferenceNotFound"
    )
    assert field in error["message"]


@pytest.mark.parametrize("field", REFERENCE_FIELDS)
def test_reference_to_a_nonexistent_object_is_reference_not_found(runtime_client, field):
    value = new_id(_PREFIXES[field])
    assert_refused(
        runtime_client(), {"type": "t", "payload": {}, field: value}, 400, "ReferenceNotFound"
    )


@pytest.mark.parametrize("field", ["conversationId", "userId", "messageId"])
def test_reference_to_own_object_of_another_kind_is_reference_not_found(runtime_client, bot, field):
    # A well-formed id of this bot, but of a workflow, not the kind the field names.
    workflow = WorkflowFactory(bot=bot)
    assert_refused(
        runtime_client(), {"type": "t", "payload": {}, field: workflow.id}, 400, "ReferenceNotFound"
    )


def test_one_bad_reference_among_good_ones_writes_nothing(runtime_client, bot):
    conversation = ConversationFactory(bot=bot)
    user = UserFactory(bot=bot)
    assert_refused(
        runtime_client(),
        {
            "type": "t",
            "payload": {},
            "conversationId": conversation.id,
            "userId": user.id,
            "workflowId": _foreign_reference("workflowId"),
        },
        400,
        "ReferenceNotFound",
    )


def test_own_references_are_stored_and_linked(runtime_client, bot):
    conversation = ConversationFactory(bot=bot)
    user = UserFactory(bot=bot)
    message = MessageFactory(conversation=conversation, user=user)
    workflow = WorkflowFactory(bot=bot)
    event = event_of(
        post(
            runtime_client(),
            {
                "type": "t",
                "payload": {"k": "v"},
                "conversationId": conversation.id,
                "userId": user.id,
                "messageId": message.id,
                "workflowId": workflow.id,
            },
        )
    )
    assert set(event) == BASE_KEYS | {"conversationId", "userId", "messageId"}
    assert "workflowId" not in event
    assert event["conversationId"] == conversation.id
    assert event["userId"] == user.id
    assert event["messageId"] == message.id
    row = Event.objects.get(id=event["id"])
    assert row.conversation == conversation
    assert row.user == user
    assert row.message == message
    assert row.workflow == workflow


@pytest.mark.parametrize("field", ["conversationId", "userId", "messageId"])
def test_only_the_references_that_are_set_appear(runtime_client, bot, field):
    conversation = ConversationFactory(bot=bot)
    values = {
        "conversationId": conversation.id,
        "userId": UserFactory(bot=bot).id,
        "messageId": MessageFactory(conversation=conversation).id,
    }
    event = event_of(post(runtime_client(), {"type": "t", "payload": {}, field: values[field]}))
    assert set(event) == BASE_KEYS | {field}
    assert event[field] == values[field]


def test_workflow_id_is_stored_but_not_returned(runtime_client, bot):
    workflow = WorkflowFactory(bot=bot)
    event = event_of(
        post(runtime_client(), {"type": "t", "payload": {}, "workflowId": workflow.id})
    )
    assert set(event) == BASE_KEYS
    assert Event.objects.get(id=event["id"]).workflow_id == workflow.id


# --- integration headers ------------------------------------------------------------


def test_x_integration_id_of_an_installed_integration_is_recorded(runtime_client, bot):
    installation = InstallationFactory(bot=bot)
    InstallationFactory(bot=bot)  # another one, not named
    event = event_of(
        post(
            runtime_client(),
            {"type": "t", "payload": {}},
            HTTP_X_INTEGRATION_ID=installation.integration_id,
        )
    )
    assert set(event) == BASE_KEYS
    assert Event.objects.get(id=event["id"]).integration == installation


def test_x_integration_alias_of_an_installation_is_recorded(runtime_client, bot):
    InstallationFactory(bot=bot)
    installation = InstallationFactory(bot=bot, alias="my-telegram")
    event = event_of(
        post(runtime_client(), {"type": "t", "payload": {}}, HTTP_X_INTEGRATION_ALIAS="my-telegram")
    )
    assert Event.objects.get(id=event["id"]).integration == installation


def test_x_integration_id_and_alias_together_name_one_installation(runtime_client, bot):
    installation = InstallationFactory(bot=bot, alias="support")
    event = event_of(
        post(
            runtime_client(),
            {"type": "t", "payload": {}},
            HTTP_X_INTEGRATION_ID=installation.integration_id,
            HTTP_X_INTEGRATION_ALIAS="support",
        )
    )
    assert Event.objects.get(id=event["id"]).integration == installation


def test_x_integration_id_installed_only_on_another_bot_is_reference_not_found(runtime_client, bot):
    elsewhere = InstallationFactory(bot=BotFactory(workspace=bot.workspace))
    assert_refused(
        runtime_client(),
        {"type": "t", "payload": {}},
        400,
        "ReferenceNotFound",
        HTTP_X_INTEGRATION_ID=elsewhere.integration_id,
    )


def test_x_integration_alias_of_another_bot_is_reference_not_found(runtime_client, bot):
    InstallationFactory(bot=BotFactory(), alias="theirs")
    assert_refused(
        runtime_client(),
        {"type": "t", "payload": {}},
        400,
        "ReferenceNotFound",
        HTTP_X_INTEGRATION_ALIAS="theirs",
    )


def test_unknown_x_integration_id_is_reference_not_found(runtime_client, bot):
    InstallationFactory(bot=bot)
    assert_refused(
        runtime_client(),
        {"type": "t", "payload": {}},
        400,
        "ReferenceNotFound",
        HTTP_X_INTEGRATION_ID=new_id("intg"),
    )


def test_x_integration_id_and_alias_of_different_installations_is_reference_not_found(
    runtime_client, bot
):
    first = InstallationFactory(bot=bot, alias="first")
    InstallationFactory(bot=bot, alias="second")
    assert_refused(
        runtime_client(),
        {"type": "t", "payload": {}},
        400,
        "ReferenceNotFound",
        HTTP_X_INTEGRATION_ID=first.integration_id,
        HTTP_X_INTEGRATION_ALIAS="second",
    )


def test_no_integration_header_records_no_integration(runtime_client, bot):
    InstallationFactory(bot=bot)
    event = event_of(post(runtime_client(), {"type": "t", "payload": {}}))
    assert Event.objects.get(id=event["id"]).integration_id is None


def test_query_count_of_a_create(runtime_client, django_assert_num_queries):
    client = runtime_client()
    post(client, {"type": "t", "payload": {}})  # the token's last use is recorded on first use
    # the insert (the credentials were kept by the first request)
    with django_assert_num_queries(1):
        response = post(client, {"type": "t", "payload": {"a": 1}})
    assert response.status_code == 201
