from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from adminapi.answers import AuditRecordListSerializer
from adminapi.presenters import audit_record_json
from adminapi.serializers import AuditRecordQuery
from adminapi.views.base import AdminViewSet
from bots.selectors.audit_records import audit_records_list, audit_workspace_check
from platform_site.api.permissions import CanReadAudit
from platform_site.api.principals import workspace_principal
from platform_site.api.query import validate_query
from platform_site.api.schema import NEXT_TOKEN, PAGE_SIZE
from platform_site.foundation.pagination import page_request


class AuditRecordViewSet(AdminViewSet):
    permissions_by_action = {"list": [CanReadAudit]}

    @extend_schema(
        summary="List the workspace's audit records, newest first",
        operation_id="getAuditRecords",
        parameters=[AuditRecordQuery, NEXT_TOKEN, PAGE_SIZE],
        responses={200: AuditRecordListSerializer},
    )
    def list(self, request: Request, workspace_id: str) -> Response:
        workspace = workspace_principal(request).workspace
        audit_workspace_check(workspace=workspace, workspace_id=workspace_id)
        query = validate_query(AuditRecordQuery, request.query_params)
        actor_id = query.get("actorId")
        page = audit_records_list(
            workspace=workspace,
            page=page_request(request.query_params),
            action=query.get("action"),
            actor_id=None if actor_id is None else int(actor_id),
        )
        return Response(page.json("records", audit_record_json))
