"""The participants of a conversation: only participants see them, only the
owner adds or removes them, and the owner cannot be removed."""

from typing import Any

import pytest
from rest_framework.test import APIClient

from bots.models import Conversation, Participant, User
from chat.models import ChatConnection
from tests.conftest import assert_error
from tests.factories import (
    BotFactory,
    ChatConnectionFactory,
    ConversationFactory,
    ParticipantFactory,
    UserFactory,
    user_key,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def connection(bot) -> ChatConnection:
    return ChatConnectionFactory(bot=bot)


@pytest.fixture
def owner(bot) -> User:
    return UserFactory(bot=bot, chat_id="owner", name="Olive")


@pytest.fixture
def member(bot) -> User:
    return UserFactory(bot=bot, chat_id="team/member")


@pytest.fixture
def outsider(bot) -> User:
    return UserFactory(bot=bot, chat_id="outsider")


@pytest.fixture
def conversation(owner, member) -> Conversation:
    """`room/1`, owned by `owner`, with `member` taking part."""
    conversation = ConversationFactory(bot=owner.bot, chat_id="room/1", owner=owner)
    ParticipantFactory(conversation=conversation, user=owner)
    ParticipantFactory(conversation=conversation, user=member)
    return conversation


def as_user(connection: ChatConnection, user: User) -> APIClient:
    return APIClient(HTTP_X_USER_KEY=user_key(connection, user))


def url(connection: ChatConnection, path: str = "") -> str:
    return f"/chat/{connection.webhook_id}/conversations/room/1/participants{path}"


def participant_ids(conversation: Conversation) -> set[str]:
    return set(
        Participant.objects.filter(conversation=conversation).values_list(
            "user__chat_id", flat=True
        )
    )


# --- listing ----------------------------------------------------------------


@pytest.mark.parametrize("who", ["owner", "member"])
def test_participants_see_the_participants_in_the_order_they_joined(
    connection, conversation, who, request
):
    response = as_user(connection, request.getfixturevalue(who)).get(url(connection))
    assert response.status_code == 200, response.content
    body = response.json()
    assert [p["id"] for p in body["participants"]] == ["owner", "team/member"]
    assert body["participants"][0]["name"] == "Olive"
    assert set(body["participants"][0]) == {"id", "name", "createdAt", "updatedAt"}
    assert body["meta"] == {}


def test_list_participants_in_pages(connection, conversation, owner, bot):
    for n in range(5):
        ParticipantFactory(conversation=conversation, user=UserFactory(bot=bot, chat_id=f"u{n}"))
    client = as_user(connection, owner)
    seen: list[str] = []
    token = None
    while True:
        query: dict[str, Any] = {"pageSize": 3, **({"nextToken": token} if token else {})}
        body = client.get(url(connection), query).json()
        assert len(body["participants"]) <= 3
        seen += [p["id"] for p in body["participants"]]
        token = body["meta"].get("nextToken")
        if not token:
            break
    assert seen == ["owner", "team/member", "u0", "u1", "u2", "u3", "u4"]


def test_list_participants_with_a_tampered_token_is_400(connection, conversation, owner):
    response = as_user(connection, owner).get(url(connection), {"nextToken": "x:y"})
    assert_error(response, 400, "InvalidQuery")


def test_list_participants_query_count(
    connection, conversation, owner, bot, django_assert_num_queries
):
    for n in range(4):
        ParticipantFactory(conversation=conversation, user=UserFactory(bot=bot, chat_id=f"u{n}"))
    client = as_user(connection, owner)
    # The connection, the key's user, the workspace's rate limits (kept a while
    # by each process, like the first two), the conversation with the caller's
    # part in it, the page.
    with django_assert_num_queries(5):
        response = client.get(url(connection))
    assert len(response.json()["participants"]) == 6


def test_an_outsider_cannot_list_participants(connection, conversation, outsider):
    assert_error(as_user(connection, outsider).get(url(connection)), 403, "Forbidden")


def test_participants_of_an_unknown_conversation_is_404(connection, owner):
    response = as_user(connection, owner).get(
        f"/chat/{connection.webhook_id}/conversations/nowhere/participants"
    )
    assert_error(response, 404, "ResourceNotFound")


# --- adding -----------------------------------------------------------------


def add(connection: ChatConnection, actor: User, body: Any) -> Any:
    return as_user(connection, actor).post(url(connection), body, format="json")


def test_owner_adds_a_participant(connection, conversation, owner, outsider):
    response = add(connection, owner, {"userId": "outsider"})
    assert response.status_code == 201, response.content
    assert response.json()["participant"]["id"] == "outsider"
    assert participant_ids(conversation) == {"owner", "team/member", "outsider"}
    # The new participant now sees the conversation.
    seen = as_user(connection, outsider).get(f"/chat/{connection.webhook_id}/conversations/room/1")
    assert seen.status_code == 200, seen.content


def test_adding_a_participant_already_there_changes_nothing(connection, conversation, owner):
    response = add(connection, owner, {"userId": "team/member"})
    assert response.status_code == 200, response.content
    assert response.json()["participant"]["id"] == "team/member"
    assert Participant.objects.filter(conversation=conversation).count() == 2


def test_a_member_who_is_not_the_owner_cannot_add(connection, conversation, member, outsider):
    response = add(connection, member, {"userId": "outsider"})
    assert "owner" in assert_error(response, 403, "Forbidden")["message"]
    assert participant_ids(conversation) == {"owner", "team/member"}


def test_an_outsider_cannot_add_themselves(connection, conversation, outsider):
    assert_error(add(connection, outsider, {"userId": "outsider"}), 403, "Forbidden")
    assert participant_ids(conversation) == {"owner", "team/member"}


def test_adding_an_unknown_user_is_reference_not_found(connection, conversation, owner):
    response = add(connection, owner, {"userId": "ghost"})
    assert "userId" in assert_error(response, 400, "ReferenceNotFound")["message"]


def test_adding_a_user_of_another_bot_is_reference_not_found(connection, conversation, owner):
    UserFactory(bot=BotFactory(), chat_id="stranger")
    assert_error(add(connection, owner, {"userId": "stranger"}), 400, "ReferenceNotFound")
    assert participant_ids(conversation) == {"owner", "team/member"}


@pytest.mark.parametrize(
    "body", [{}, {"userId": ""}, {"userId": 5}, {"userId": "a b"}, {"userId": "x", "role": "a"}]
)
def test_adding_with_a_bad_body_is_400(connection, conversation, owner, body):
    assert_error(add(connection, owner, body), 400, "InvalidPayload")


def test_adding_to_an_unknown_conversation_is_404(connection, owner, outsider):
    response = as_user(connection, owner).post(
        f"/chat/{connection.webhook_id}/conversations/nowhere/participants",
        {"userId": "outsider"},
        format="json",
    )
    assert_error(response, 404, "ResourceNotFound")


# --- getting one ------------------------------------------------------------


def test_get_a_participant_whose_id_holds_a_slash(connection, conversation, owner):
    response = as_user(connection, owner).get(url(connection, "/team/member"))
    assert response.status_code == 200, response.content
    assert response.json() == {
        "participant": {
            "id": "team/member",
            "createdAt": response.json()["participant"]["createdAt"],
            "updatedAt": response.json()["participant"]["updatedAt"],
        }
    }


def test_get_a_user_who_does_not_take_part_is_404(connection, conversation, owner, outsider):
    response = as_user(connection, owner).get(url(connection, "/outsider"))
    assert "outsider" in assert_error(response, 404, "ResourceNotFound")["message"]


def test_get_a_participant_as_an_outsider_is_403(connection, conversation, outsider):
    assert_error(as_user(connection, outsider).get(url(connection, "/owner")), 403, "Forbidden")


def test_get_a_participant_by_an_impossible_id_is_400(connection, conversation, owner):
    response = as_user(connection, owner).get(url(connection, "/not%20an%20id"))
    assert_error(response, 400, "InvalidIdentifier")


# --- removing ---------------------------------------------------------------


def test_owner_removes_a_participant(connection, conversation, owner, member):
    response = as_user(connection, owner).delete(url(connection, "/team/member"))
    assert response.status_code == 200, response.content
    assert response.json() == {}
    assert participant_ids(conversation) == {"owner"}
    assert User.objects.filter(pk=member.pk).exists()
    # Once removed, the conversation is closed to them.
    gone = as_user(connection, member).get(f"/chat/{connection.webhook_id}/conversations/room/1")
    assert_error(gone, 403, "Forbidden")


def test_removing_the_owner_is_forbidden(connection, conversation, owner):
    response = as_user(connection, owner).delete(url(connection, "/owner"))
    assert "owns" in assert_error(response, 403, "Forbidden")["message"]
    assert participant_ids(conversation) == {"owner", "team/member"}


def test_a_member_cannot_remove_anyone(connection, conversation, member, owner):
    for target in ("/team/member", "/owner"):
        response = as_user(connection, member).delete(url(connection, target))
        assert_error(response, 403, "Forbidden")
    assert participant_ids(conversation) == {"owner", "team/member"}


def test_an_outsider_cannot_remove_anyone(connection, conversation, outsider):
    response = as_user(connection, outsider).delete(url(connection, "/team/member"))
    assert_error(response, 403, "Forbidden")
    assert participant_ids(conversation) == {"owner", "team/member"}


def test_removing_a_user_who_does_not_take_part_is_404(connection, conversation, owner, outsider):
    response = as_user(connection, owner).delete(url(connection, "/outsider"))
    assert_error(response, 404, "ResourceNotFound")


def test_removing_an_unknown_user_is_404(connection, conversation, owner):
    response = as_user(connection, owner).delete(url(connection, "/ghost"))
    assert_error(response, 404, "ResourceNotFound")
