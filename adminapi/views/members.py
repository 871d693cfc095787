from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from adminapi.answers import WorkspaceMemberListSerializer, WorkspaceMemberSerializer
from adminapi.presenters import member_json
from adminapi.serializers import MemberCreateSerializer, MemberUpdateSerializer
from adminapi.views.base import AdminViewSet, request_actor
from bots.selectors.members import members_list, membership_get, membership_of
from bots.services.members import member_invite, member_remove, member_role_change
from platform_site.api.answers import Answers
from platform_site.api.idempotency import idempotent_create
from platform_site.api.permissions import CanManageMembers, CanReadMembers
from platform_site.api.principals import workspace_principal
from platform_site.api.schema import ERROR, NEXT_TOKEN, PAGE_SIZE
from platform_site.foundation.pagination import page_request


class MemberViewSet(AdminViewSet):
    answers = Answers()
    permissions_by_action = {
        "list": [CanReadMembers],
        "create": [CanManageMembers],
        "me": [CanReadMembers],
        "update": [CanManageMembers],
        "destroy": [CanManageMembers],
    }

    @extend_schema(
        summary="List the workspace's members, oldest first",
        operation_id="listWorkspaceMembers",
        parameters=[NEXT_TOKEN, PAGE_SIZE],
        responses={200: WorkspaceMemberListSerializer},
    )
    def list(self, request: Request) -> Response:
        page = members_list(
            workspace=workspace_principal(request).workspace,
            page=page_request(request.query_params),
        )
        return Response(page.json("members", member_json))

    @extend_schema(
        summary="Add a member by e-mail address (only an owner adds an owner)",
        operation_id="createWorkspaceMember",
        request=MemberCreateSerializer,
        responses={201: WorkspaceMemberSerializer, 409: ERROR},
    )
    @idempotent_create
    def create(self, request: Request) -> Response:
        principal = workspace_principal(request)
        serializer = MemberCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        membership = member_invite(
            workspace=principal.workspace,
            email=serializer.validated_data["email"],
            role=serializer.validated_data["role"],
            actor=request_actor(request),
            acting_role=principal.role,
        )
        return Response(member_json(membership), status=201)

    @extend_schema(
        summary="The caller's own membership",
        operation_id="getWorkspaceMember",
        # 404: the caller's membership was removed since their token was checked.
        responses={200: WorkspaceMemberSerializer, 404: ERROR},
    )
    def me(self, request: Request) -> Response:
        principal = workspace_principal(request)
        membership = membership_of(workspace=principal.workspace, account=principal.token.account)
        return Response(member_json(membership))

    @extend_schema(
        summary="Change a member's role (a workspace keeps an owner; only an owner makes one)",
        operation_id="updateWorkspaceMember",
        request=MemberUpdateSerializer,
        responses={200: WorkspaceMemberSerializer},
    )
    def update(self, request: Request, member_id: str) -> Response:
        principal = workspace_principal(request)
        membership = membership_get(workspace=principal.workspace, member_id=member_id)
        serializer = MemberUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        role = serializer.validated_data.get("role")
        if role is not None:
            membership = member_role_change(
                membership=membership,
                role=role,
                actor=request_actor(request),
                acting_role=principal.role,
            )
        return Response(member_json(membership))

    @extend_schema(
        summary="Remove a member (a workspace keeps an owner; only an owner removes one)",
        operation_id="deleteWorkspaceMember",
    )
    def destroy(self, request: Request, member_id: str) -> Response:
        principal = workspace_principal(request)
        membership = membership_get(workspace=principal.workspace, member_id=member_id)
        member_remove(
            membership=membership, actor=request_actor(request), acting_role=principal.role
        )
        return Response({})
