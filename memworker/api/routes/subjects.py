"""Subject requests over HTTP: one person's erase across every agent and pool of the tenant
(memworker/erase/subjects.py, built on the agent-level forget)."""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import APIRouter, Depends, Path, Request

from memworker import errors, keys
from memworker.api.deps import principal, tx
from memworker.domain import memories
from memworker.erase import service as erase
from memworker.schemas import SubjectForgetIn, SubjectForgotten

router = APIRouter(tags=["lifecycle"])
Subject = Annotated[str, Path(pattern=memories.SUBJECT_PATTERN, max_length=128, description="the subject to erase")]


@router.post("/v1/subjects/{subject}/forget", response_model=SubjectForgotten)
def forget_subject(
    subject: Subject, request: Request, body: SubjectForgetIn | None = None, p: keys.Principal = Depends(principal)
) -> SubjectForgotten:
    """Erase the subject from every agent and pool of the tenant in one transaction (each as
    POST /v1/agents/{agent}/forget with that subject does); one receipt, per agent and pool
    and in total. Needs the erase scope on a key that reaches every agent: a subject request
    that skipped the agents a key cannot see would look complete and not be."""
    p.require("erase")
    if p.agent_ids is not None:
        raise errors.Forbidden("a subject request spans every agent and pool: use a key not limited to some agents")
    keep_turns = body.keep_turns if body is not None else False
    with tx(request, p) as conn:
        receipt = erase.forget_subject(
            conn, tenant_id=p.tenant_id, subject=subject, actor=f"key:{p.key_id}", keep_turns=keep_turns
        )
    return cast(SubjectForgotten, receipt)
