"""The admin's comparison of a run with another (:mod:`chat.compare`): a view of
:class:`chat.admin.AgentRunAdmin`, at ``<run id>/compare/?with=<other id>``."""

from __future__ import annotations

from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from chat.compare import compare_runs, run_side
from chat.models import AgentRun
from chat.store.comparisons import run_other_takes, runs_for_comparison
from chat.traces.viewing import redact_loaded, redactor_for


class RunCompareMixin:
    """Adds ``compare_view`` to the runs' admin (which routes it in ``get_urls``)."""

    def compare_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Compare the run with run ``with`` (any run's id) step by step (:mod:`chat.compare`).

        Without ``with``: the other runs of its question to pick from, and a box for an id.
        400 for an id that is not a number or is the run's own; 404 for a run that is not
        there. Staff without ``chat.view_unredacted_trace`` read both runs redacted.
        """
        if not self.has_view_permission(request):
            raise PermissionDenied
        run = self.get_object(request, unquote(object_id))
        if run is None:
            raise Http404("No such run.")
        picked = request.GET.get("with", "").strip()
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": run,
            "title": f"Compare run {run.pk}",
            "compare_takes": run_other_takes(run=run),
            "with_value": picked[:20],
        }
        status, error = 200, ""
        if not picked:
            pass
        elif not (picked.isascii() and picked.isdigit() and len(picked) <= 18):
            status, error = 400, f"A run's id is a number, not {picked[:20]!r}."
        elif int(picked) == run.pk:
            status, error = 400, "That is this run: pick another to compare it with."
        else:
            try:
                left, right = runs_for_comparison(run_ids=(run.pk, int(picked)))
            except AgentRun.DoesNotExist:
                status, error = 404, f"There is no run {int(picked)}."
            else:
                steps = [*left.compared_steps, *right.compared_steps]
                redact_loaded(redactor_for(request.user), left, right, *steps)
                context["comparison"] = compare_runs(
                    run_side(left, left.compared_steps), run_side(right, right.compared_steps)
                )
                context["other"] = right
                context["title"] = f"Run {run.pk} and run {right.pk} compared"
        context["compare_error"] = error
        return render(request, "admin/chat/agentrun/compare.html", context, status=status)
