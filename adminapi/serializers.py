from rest_framework import serializers

from platform_site.api.fields import StrictChoiceField


class BotListQuery(serializers.Serializer):
    dev = StrictChoiceField(choices=["true", "false"], required=False)
    sortField = StrictChoiceField(choices=["createdAt", "updatedAt"], default="createdAt")
    sortDirection = StrictChoiceField(choices=["asc", "desc"], default="desc")
