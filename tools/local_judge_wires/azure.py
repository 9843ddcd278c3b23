"""Azure OpenAI's spelling of the local judge's endpoints: the deployment in the path, `?api-version=` and an
`api-key` header.

`POST /openai/deployments/<deployment>/chat/completions` answers for the deployment in the path, whatever the body
says; OpenAI's Files and Batch APIs are served under `/openai` (`/openai/files`, `/openai/batches`, ...). Every
request without `?api-version=` or an `api-key` header is refused, as Azure does, not answered.
"""

from __future__ import annotations

from aiohttp import web

from eval_platform.local_judge.batches import Handler, authorization, error_response, json_body
from eval_platform.local_judge.server import Wire


def azure_refusal(request: web.Request) -> web.Response | None:
    """Azure OpenAI's checks on every request: an `api-version` query and an `api-key` header."""
    if not request.query.get("api-version"):
        return error_response(404, "Resource not found: Azure OpenAI paths need ?api-version=", "404")
    if not request.headers.get("api-key") and not request.headers.get("Authorization"):
        return error_response(401, "Access denied due to missing subscription key (api-key header).", "401")
    return None


def _azure(handler: Handler) -> Handler:
    async def guarded(request: web.Request) -> web.StreamResponse:
        return azure_refusal(request) or await handler(request)

    return guarded


class Azure(Wire):
    def routes(self, app: web.Application) -> None:
        app.router.add_post("/openai/deployments/{deployment:.+}/chat/completions", _azure(self._chat_completions))
        self.server.batches.routes(app, prefix="/openai", guard=_azure)

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        body = await json_body(request)
        if isinstance(body, dict):  # Azure answers for the deployment in the path, whatever the body says
            body = {**body, "model": request.match_info["deployment"]}
        status, payload, headers = await self.server.interactive(body, authorization(request))
        return web.json_response(payload, status=status, headers=headers)
