"""The fake Modal control plane: the ``ModalClient`` RPCs the SDK calls for sandboxes.

Implemented (with Modal's meaning, as the pinned SDK uses them): client hello
and the input-plane auth token, App lookup/create, Environment lookup (the
image builder version), images from a registry (built at once) and by name,
and the V2 sandbox RPCs -- create, command router access, task id, wait/poll,
list by app and tags, tags get/set, lookup by name, terminate. Every other
RPC answers UNIMPLEMENTED. Each call is recorded and checks the fixed token
pair. ``idle_timeout_secs`` is recorded only: Modal counts a running exec as
activity, and sbx's session shell is one.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from typing import Any

from google.protobuf import empty_pb2
from grpclib import GRPCError, Status
from grpclib.server import Stream
from modal_proto import api_grpc, api_pb2

from .service import FakeModal, fake_jwt, unimplemented_rest

_PAGE = 50
_BUILDER_VERSION = "2025.06"


@unimplemented_rest
class ControlPlane(api_grpc.ModalClientBase):
    def __init__(self, service: FakeModal) -> None:
        self.service = service

    async def _request(self, stream: Stream[Any, Any], method: str) -> Any:
        request = await stream.recv_message()
        self.service.record(method, request)
        self.service.check_client(stream)
        return request

    # -- client, apps, images --------------------------------------------------------

    async def ClientHello(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "ClientHello")
        await stream.send_message(api_pb2.ClientHelloResponse())

    async def AuthTokenGet(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "AuthTokenGet")
        await stream.send_message(api_pb2.AuthTokenGetResponse(token=fake_jwt("client")))

    async def AppGetOrCreate(self, stream: Stream[Any, Any]) -> None:
        req = await self._request(stream, "AppGetOrCreate")
        key = f"{req.environment_name}/{req.app_name}"
        app_id = self.service.apps.get(key)
        if app_id is None:
            if req.object_creation_type != api_pb2.OBJECT_CREATION_TYPE_CREATE_IF_MISSING:
                raise GRPCError(Status.NOT_FOUND, f"App '{req.app_name}' not found")
            app_id = self.service.apps[key] = self.service.new_id("ap")
        await stream.send_message(api_pb2.AppGetOrCreateResponse(app_id=app_id))

    async def EnvironmentGetOrCreate(self, stream: Stream[Any, Any]) -> None:
        await self._request(stream, "EnvironmentGetOrCreate")
        settings = api_pb2.EnvironmentSettings(image_builder_version=_BUILDER_VERSION)
        metadata = api_pb2.EnvironmentMetadata(name="main", settings=settings)
        await stream.send_message(
            api_pb2.EnvironmentGetOrCreateResponse(environment_id="en-fake", metadata=metadata)
        )

    async def ImageGetOrCreate(self, stream: Stream[Any, Any]) -> None:
        req = await self._request(stream, "ImageGetOrCreate")
        digest = hashlib.sha256(req.image.SerializeToString(deterministic=True)).hexdigest()
        success = api_pb2.GenericResult(status=api_pb2.GenericResult.GENERIC_STATUS_SUCCESS)
        await stream.send_message(
            api_pb2.ImageGetOrCreateResponse(image_id=f"im-{digest[:24]}", result=success)
        )

    async def ImageGetByTag(self, stream: Stream[Any, Any]) -> None:
        req = await self._request(stream, "ImageGetByTag")
        image_id = self.service.named_images.get(req.tag)
        if image_id is None:
            raise GRPCError(Status.NOT_FOUND, f"Image '{req.tag}' not found")
        await stream.send_message(api_pb2.ImageGetByTagResponse(image_id=image_id))

    # -- sandboxes ----------------------------------------------------------------------

    async def SandboxCreateV2(self, stream: Stream[Any, Any]) -> None:
        req = await self._request(stream, "SandboxCreateV2")
        service = self.service
        if service.quota_exceeded:
            raise GRPCError(
                Status.RESOURCE_EXHAUSTED,
                "Workspace has reached its limit of concurrent sandboxes (quota exceeded)",
            )
        name = req.definition.name
        if name and any(s.name == name and s.app_id == req.app_id for s in service.running()):
            raise GRPCError(Status.ALREADY_EXISTS, f"Sandbox with name '{name}' already exists")
        env: dict[str, str] = {}
        for source in req.secret_sources:
            env.update(source.env.contents)
        tags = {t.tag_name: t.tag_value for t in req.tags}
        sandbox = await service.create_sandbox(req.app_id, req.definition, tags, env)
        if service.create_hangs:
            await asyncio.Event().wait()  # until the client gives up and cancels the call
        await stream.send_message(
            api_pb2.SandboxCreateV2Response(
                sandbox_id=sandbox.sandbox_id,
                task_id=sandbox.task_id,
                metadata=api_pb2.SandboxHandleMetadata(app_id=sandbox.app_id),
                command_router_access=api_pb2.CommandRouterAccess(
                    url=service.router_url, jwt=sandbox.jwt
                ),
            )
        )

    async def SandboxGetCommandRouterAccess(self, stream: Stream[Any, Any]) -> None:
        req = await self._request(stream, "SandboxGetCommandRouterAccess")
        sandbox = self.service.get(req.sandbox_id)
        if not sandbox.running:
            raise GRPCError(Status.FAILED_PRECONDITION, f"Sandbox {req.sandbox_id} has finished")
        await stream.send_message(
            api_pb2.SandboxGetCommandRouterAccessResponse(
                url=self.service.router_url, jwt=sandbox.jwt
            )
        )

    async def SandboxGetTaskIdV2(self, stream: Stream[Any, Any]) -> None:
        req = await self._request(stream, "SandboxGetTaskIdV2")
        sandbox = self.service.get(req.sandbox_id)
        if sandbox.running:
            response = api_pb2.SandboxGetTaskIdResponse(task_id=sandbox.task_id)
        else:
            response = api_pb2.SandboxGetTaskIdResponse(task_result=sandbox.result)
        await stream.send_message(response)

    async def SandboxWaitV2(self, stream: Stream[Any, Any]) -> None:
        req = await self._request(stream, "SandboxWaitV2")
        sandbox = self.service.get(req.sandbox_id)
        if sandbox.running and req.timeout > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(sandbox.finished.wait(), req.timeout)
        await stream.send_message(
            api_pb2.SandboxWaitResponse(
                result=sandbox.result, metadata=api_pb2.SandboxHandleMetadata(app_id=sandbox.app_id)
            )
        )

    async def SandboxListV2(self, stream: Stream[Any, Any]) -> None:
        req = await self._request(stream, "SandboxListV2")
        wanted = {t.tag_name: t.tag_value for t in req.tags}
        found = [
            s
            for s in self.service.sandboxes.values()
            if (not req.app_id or s.app_id == req.app_id)
            and (s.running or req.include_finished)
            and all(s.tags.get(k) == v for k, v in wanted.items())
            and (not req.before_timestamp or s.created_at < req.before_timestamp)
        ]
        found.sort(key=lambda s: s.created_at, reverse=True)
        await stream.send_message(
            api_pb2.SandboxListResponse(sandboxes=[s.info() for s in found[:_PAGE]])
        )

    async def SandboxGetFromNameV2(self, stream: Stream[Any, Any]) -> None:
        req = await self._request(stream, "SandboxGetFromNameV2")
        app_id = self.service.apps.get(f"{req.environment_name}/{req.app_name}")
        named = [
            s
            for s in self.service.sandboxes.values()
            if s.app_id == app_id and s.name == req.sandbox_name
            and (s.running or req.include_terminated)
        ]  # fmt: skip
        # The running one; else (include_terminated) the most recent that ended.
        named.sort(key=lambda s: (s.running, s.created_at), reverse=True)
        if not named:
            raise GRPCError(Status.NOT_FOUND, f"Sandbox with name '{req.sandbox_name}' not found")
        sandbox = named[0]
        await stream.send_message(
            api_pb2.SandboxGetFromNameResponse(
                sandbox_id=sandbox.sandbox_id,
                metadata=api_pb2.SandboxHandleMetadata(
                    app_id=sandbox.app_id, result=sandbox.result
                ),
            )
        )

    async def SandboxTagsGetV2(self, stream: Stream[Any, Any]) -> None:
        req = await self._request(stream, "SandboxTagsGetV2")
        sandbox = self.service.get(req.sandbox_id)
        tags = [api_pb2.SandboxTag(tag_name=k, tag_value=v) for k, v in sandbox.tags.items()]
        await stream.send_message(api_pb2.SandboxTagsGetResponse(tags=tags))

    async def SandboxTagsSetV2(self, stream: Stream[Any, Any]) -> None:
        req = await self._request(stream, "SandboxTagsSetV2")
        sandbox = self.service.get(req.sandbox_id)
        sandbox.tags = {t.tag_name: t.tag_value for t in req.tags}
        await stream.send_message(empty_pb2.Empty())

    async def SandboxTerminateV2(self, stream: Stream[Any, Any]) -> None:
        req = await self._request(stream, "SandboxTerminateV2")
        sandbox = self.service.get(req.sandbox_id)
        await self.service.terminate(sandbox, api_pb2.GenericResult.GENERIC_STATUS_TERMINATED)
        await stream.send_message(api_pb2.SandboxTerminateResponse())
