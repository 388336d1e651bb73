"""The question tree's walks: a conversation's ``{question: parent}`` pairs and the paths
through them (:mod:`chat.store.branches` explains the tree). Shared by the store modules
that follow a branch (history, the page's window, a new question's parent)."""

from __future__ import annotations

from collections import defaultdict

from chat.models import Conversation, Message

Tree = dict[int, int | None]  # question id -> its parent's id


def question_tree(conversation_id: int) -> Tree:
    """Return the conversation's questions as ``{id: parent id}`` (one query)."""
    rows = Message.objects.filter(conversation_id=conversation_id, role=Message.Role.USER)
    return dict(rows.values_list("id", "parent_id"))


def _tree_holding(message_id: int) -> Tree:
    """Return the questions of the conversation holding ``message_id`` (one query)."""
    holder = Message.objects.filter(pk=message_id).values("conversation_id")
    rows = Message.objects.filter(conversation_id__in=holder, role=Message.Role.USER)
    return dict(rows.values_list("id", "parent_id"))


def ancestors(message_id: int | None, tree: Tree) -> list[int]:
    """Return the path from the root to ``message_id`` (included), oldest first.

    ``tree`` holds the questions known so far (it is extended in place); a parent it does
    not hold is in another conversation (a fork's source), whose questions are read then.
    A cycle (edited data) or a parent gone ends the walk.
    """
    path: list[int] = []
    seen: set[int] = set()
    current = message_id
    while current is not None and current not in seen:
        if current not in tree:
            more = _tree_holding(current)
            if current not in more:
                break
            tree.update(more)
        seen.add(current)
        path.append(current)
        current = tree[current]
    return path[::-1]


def children_of(tree: Tree) -> dict[int | None, list[int]]:
    """Return each question's takes of the next question, by parent id, oldest first."""
    children: dict[int | None, list[int]] = defaultdict(list)
    for question, parent in sorted(tree.items()):
        children[parent].append(question)
    return children


def path_leaf(conversation: Conversation, tree: Tree | None = None) -> int | None:
    """Return the leaf of the branch ``conversation`` shows: its ``current_message``, else
    its newest question, else (a fork with no question yet) the question it was forked
    from; None for an empty conversation."""
    if conversation.current_message_id is not None:
        return conversation.current_message_id
    if tree is None:
        newest = Message.objects.filter(conversation=conversation, role=Message.Role.USER)
        leaf = newest.order_by("-created_at", "-id").values_list("id", flat=True).first()
    else:
        leaf = max(tree, default=None)
    return leaf if leaf is not None else conversation.forked_from_id


def exchange_path(*, message_id: int, conversation_id: int) -> list[int]:
    """Return the questions before ``message_id`` on its branch, oldest first (what a run
    of that question is sent as history): its ancestors, across a fork into its source."""
    return ancestors(message_id, question_tree(conversation_id))[:-1]


def newest_leaf(question_id: int, tree: Tree) -> int:
    """Return the newest question (the largest id) with no answer after it on a branch
    under ``question_id`` (itself when nothing follows it)."""
    children = children_of(tree)
    leaves, stack = [], [question_id]
    while stack:
        node = stack.pop()
        below = children.get(node, [])
        if not below:
            leaves.append(node)
        stack.extend(below)
    return max(leaves)
