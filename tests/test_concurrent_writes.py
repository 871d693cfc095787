"""A constraint broken by a concurrent request between a request's reads and
its commit is a 4xx in the error body, and nothing is written."""

import pytest
from django.db import IntegrityError, transaction
from rest_framework.test import APIClient

import chat.services.conversations
from bots.models import Conversation, User
from platform_site.api.exception_handler import to_api_error
from platform_site.foundation.ids import new_id
from tests.conftest import assert_error
from tests.factories import BotFactory, ChatConnectionFactory, UserFactory, user_key


@pytest.mark.django_db(transaction=True)
def test_a_user_deleted_while_their_conversation_is_made(monkeypatch):
    """The foreign key to the deleted user fails at commit (checks are
    deferred): a 400 ReferenceNotFound, not a 500, and no conversation."""
    connection = ChatConnectionFactory()
    user = UserFactory(bot=connection.bot)
    key = user_key(connection, user)

    def deleting_then_new_id(prefix: str) -> str:
        # Another request's DELETE /users/me lands between the key's check
        # and this request's commit.
        User.objects.filter(pk=user.pk).delete()
        return new_id(prefix)

    monkeypatch.setattr(chat.services.conversations, "new_id", deleting_then_new_id)
    response = APIClient().post(
        f"/chat/{connection.webhook_id}/conversations", {}, format="json", HTTP_X_USER_KEY=key
    )
    body = assert_error(response, 400, "ReferenceNotFound")
    assert "deleted while it ran" in body["message"]
    assert not Conversation.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_unique_constraint_broken_by_a_racing_insert_is_already_exists():
    bot = BotFactory()
    UserFactory(bot=bot, chat_id="taken")
    with pytest.raises(IntegrityError) as caught, transaction.atomic():
        User.objects.create(id=new_id("user"), bot=bot, chat_id="taken")
    error = to_api_error(caught.value)
    assert error is not None
    assert (error.status_code, error.type) == (409, "AlreadyExists")


def test_other_integrity_errors_stay_unexpected():
    assert to_api_error(IntegrityError("CHECK constraint failed: something")) is None
