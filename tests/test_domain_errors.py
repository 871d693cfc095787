"""Services refuse with domain errors; the one exception handler answers each
kind with the contract's type and status, and the message as it was said."""

import pytest

from bots.models import Conversation
from platform_site.api.exception_handler import handle_exception
from platform_site.foundation import domain_errors
from platform_site.foundation.lookups import object_get
from tests.factories import BotFactory, ConversationFactory

KINDS = [
    (domain_errors.NotFound, 404, "ResourceNotFound"),
    (domain_errors.MissingReference, 400, "ReferenceNotFound"),
    (domain_errors.InvalidValue, 400, "InvalidPayload"),
    (domain_errors.InvalidFilter, 400, "InvalidQuery"),
    (domain_errors.TooLarge, 413, "PayloadTooLarge"),
    (domain_errors.MalformedId, 400, "InvalidIdentifier"),
    (domain_errors.AlreadyExists, 409, "AlreadyExists"),
    (domain_errors.NotPermitted, 403, "Forbidden"),
]


def answer(exc: Exception) -> tuple[int, dict]:
    response = handle_exception(exc, {})
    return response.status_code, response.data


@pytest.mark.parametrize(
    ("kind", "status", "wire_type"), KINDS, ids=lambda k: getattr(k, "__name__", k)
)
def test_each_kind_is_answered_as_the_contract_says(kind, status, wire_type):
    code, body = answer(kind("conversationId: 'conv_x' does not exist in this bot"))
    assert code == status
    assert body["code"] == status
    assert body["type"] == wire_type
    assert body["message"] == "conversationId: 'conv_x' does not exist in this bot"


def test_every_kind_is_mapped():
    kinds = set(domain_errors.DomainError.__subclasses__())
    assert kinds == {kind for kind, _, _ in KINDS}


def test_a_kind_of_a_kind_is_answered_as_its_parent():
    class StaleToken(domain_errors.InvalidFilter):
        pass

    assert answer(StaleToken("nextToken is stale"))[1]["type"] == "InvalidQuery"


def test_a_bare_refusal_is_a_bad_request_with_its_default_message():
    code, body = answer(domain_errors.DomainError())
    assert (code, body["type"]) == (400, "InvalidPayload")
    assert body["message"] == domain_errors.DomainError.default_message


def test_the_error_body_is_the_one_error_body():
    _, body = answer(domain_errors.NotFound())
    assert set(body) == {"id", "code", "type", "message"}
    assert body["message"] == "The requested object was not found"


@pytest.mark.django_db
def test_object_get_refuses_a_malformed_id_without_a_query(django_assert_num_queries, bot):
    with (
        django_assert_num_queries(0),
        pytest.raises(domain_errors.MalformedId, match="an event id"),
    ):
        object_get(Conversation.objects, object_id="conv_1", prefix="evt", noun="event", bot=bot)
    with (
        django_assert_num_queries(0),
        pytest.raises(domain_errors.MalformedId, match="a conversation id"),
    ):
        object_get(Conversation.objects, object_id="evt_1", prefix="conv", noun="conversation")


@pytest.mark.django_db
def test_object_get_finds_only_within_its_scope(bot):
    mine = ConversationFactory(bot=bot)
    theirs = ConversationFactory(bot=BotFactory())
    assert (
        object_get(
            Conversation.objects, object_id=mine.id, prefix="conv", noun="conversation", bot=bot
        )
        == mine
    )
    with pytest.raises(domain_errors.NotFound, match=f"Conversation '{theirs.id}' not found"):
        object_get(
            Conversation.objects, object_id=theirs.id, prefix="conv", noun="conversation", bot=bot
        )
