from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    verbose_name = "Chat interface"

    def ready(self) -> None:
        from chat import openapi  # noqa: F401 - registers the OpenAPI auth extension
        from chat.selectors.scheduled_messages import scheduled_message_next_due
        from chat.selectors.states import state_next_expiry
        from chat.services.scheduled_messages import scheduled_messages_publish
        from chat.services.state_expiry import states_expire
        from events.engine.clock_work import ClockWork, clock_work_register

        # Scheduled bot messages fall due on the delivery engine's clock.
        clock_work_register(
            "chat.scheduled_messages",
            ClockWork(publish=scheduled_messages_publish, next_due=scheduled_message_next_due),
        )
        # So do states' expiries: each becomes a state_expired event.
        clock_work_register(
            "chat.state_expiry", ClockWork(publish=states_expire, next_due=state_next_expiry)
        )
