from rest_framework import serializers


class BotListQuery(serializers.Serializer):
    dev = serializers.ChoiceField(choices=["true", "false"], required=False)
    sortField = serializers.ChoiceField(choices=["createdAt", "updatedAt"], default="createdAt")
    sortDirection = serializers.ChoiceField(choices=["asc", "desc"], default="desc")
