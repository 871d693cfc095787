from django.contrib import admin

from chat.models import ChatConnection


@admin.register(ChatConnection)
class ChatConnectionAdmin(admin.ModelAdmin):
    list_display = ["webhook_id", "name", "bot", "user_key_mode", "created_at"]
    list_filter = ["user_key_mode"]
    search_fields = ["webhook_id", "name", "bot__id"]
    list_select_related = ["bot"]
    readonly_fields = ["webhook_id", "created_at"]
    raw_id_fields = ["bot"]
