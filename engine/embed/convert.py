"""A sentence-transformers BERT model (a folder, or a zip of one) written as a GGUF file.

    python -m engine.embed.convert MODEL_DIR_OR_ZIP OUT.gguf [--type q8_0|f16|f32]

What llama.cpp's `bert` architecture reads: the hyperparameters of
config.json, the pooling of 1_Pooling/config.json (mean, CLS or last), the
WordPiece vocabulary of tokenizer.json and the weights of model.safetensors
under llama.cpp's tensor names (the gguf package's own name map). Only
numpy and gguf are needed: the safetensors file is a JSON header and raw
little-endian arrays, read in place.

llama.cpp's WordPiece tokenizer marks the start of a word, not its
continuation: a piece "##ing" is stored as "ing" and a word-start piece
"run" as "\u2581run"; special tokens ([CLS], [SEP]...) stay as they are.
"""

import argparse
import io
import json
import struct
import sys
import zipfile
from pathlib import Path

import gguf
import gguf.quants
import numpy as np

WORD_START = "\u2581"
POOLING = {"pooling_mode_mean_tokens": gguf.PoolingType.MEAN,
           "pooling_mode_cls_token": gguf.PoolingType.CLS,
           "pooling_mode_lasttoken": gguf.PoolingType.LAST}
SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "I64": np.int64}
# Weights llama.cpp's bert graph does not use (embeddings only: no pooler, no MLM head).
UNUSED = ("embeddings.position_ids", "pooler.", "cls.")
# Matrices take the chosen type; norms, biases and the position and token-type
# embeddings, which llama.cpp adds to f32 activations, stay f32.
ADDED_AS_IS = ("position_embd", "token_types")
QUANT_TYPES = {"q8_0": gguf.GGMLQuantizationType.Q8_0}
FILE_TYPES = {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
              "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}


class ConvertError(Exception):
    """The source is not a BERT sentence-transformers model this converter handles."""


class Source:
    """The model's files, from a folder or from a zip (at its root or one folder down),
    or from a wheel that holds such a zip as its `model.zip`."""

    def __init__(self, path: Path):
        self.path = path
        self.zip = zipfile.ZipFile(path) if zipfile.is_zipfile(path) else None
        self.prefix = ""
        inner = [n for n in self.zip.namelist() if Path(n).name == "model.zip"] if self.zip else []
        if inner:
            self.zip = zipfile.ZipFile(io.BytesIO(self.zip.read(inner[0])))
        if self.zip is not None:
            configs = [n for n in self.zip.namelist() if n.endswith("config.json")
                       and n.count("/") <= 1 and Path(n).name == "config.json"]
            if not configs:
                raise ConvertError(f"{path}: no config.json in the zip")
            self.prefix = min(configs, key=len)[:-len("config.json")]

    def read(self, name: str) -> bytes:
        try:
            if self.zip is not None:
                return self.zip.read(self.prefix + name)
            return (self.path / name).read_bytes()
        except (KeyError, FileNotFoundError):
            raise ConvertError(f"{self.path}: {name} is missing") from None

    def json(self, name: str, default=None):
        try:
            return json.loads(self.read(name))
        except ConvertError:
            if default is not None:
                return default
            raise


def read_safetensors(data: bytes) -> dict[str, np.ndarray]:
    """Tensors by name, as arrays over `data` (no copy)."""
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    base = 8 + length
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = SAFETENSORS_DTYPES.get(info["dtype"])
        start, stop = info["data_offsets"]
        if info["dtype"] == "BF16":  # widen to f32: bf16 is the top half of an f32
            raw = np.frombuffer(data, np.uint16, (stop - start) // 2, base + start)
            array = (raw.astype(np.uint32) << 16).view(np.float32)
        elif dtype is None:
            raise ConvertError(f"tensor {name}: dtype {info['dtype']} is not handled")
        else:
            array = np.frombuffer(data, dtype, (stop - start) // np.dtype(dtype).itemsize, base + start)
        tensors[name] = array.reshape(info["shape"])
    return tensors


def vocabulary(tokenizer: dict) -> tuple[list[str], list[int], dict[str, int]]:
    """(pieces in llama.cpp's spelling, their token types, special token ids by role)."""
    model = tokenizer.get("model", {})
    if model.get("type") != "WordPiece":
        raise ConvertError(f"the tokenizer is {model.get('type')!r}, not WordPiece")
    vocab = model["vocab"]
    pieces = [""] * len(vocab)
    for piece, token_id in vocab.items():
        pieces[token_id] = piece
    special = {t["content"]: t["id"] for t in tokenizer.get("added_tokens", []) if t.get("special")}
    types, spelled = [], []
    for token_id, piece in enumerate(pieces):
        if piece in special:
            types.append(gguf.TokenType.CONTROL)
            spelled.append(piece)
        else:
            types.append(gguf.TokenType.NORMAL)
            spelled.append(piece[2:] if piece.startswith("##") else WORD_START + piece)
    return spelled, types, special


def pooling(source: Source) -> gguf.PoolingType:
    config = source.json("1_Pooling/config.json", default={"pooling_mode_mean_tokens": True})
    chosen = [kind for key, kind in POOLING.items() if config.get(key)]
    if len(chosen) != 1:
        raise ConvertError(f"1_Pooling/config.json: expected one pooling mode, found {config}")
    return chosen[0]


def convert(source_path: "str | Path", out: "str | Path", dtype: str = "q8_0") -> Path:
    """Write the GGUF file (whole under a temporary name, then renamed); its path."""
    source = Source(Path(source_path))
    config = source.json("config.json")
    if config.get("model_type") != "bert":
        raise ConvertError(f"config.json: model_type {config.get('model_type')!r}, not bert")
    pieces, types, special = vocabulary(source.json("tokenizer.json"))
    if source.json("tokenizer_config.json", default={"do_lower_case": True}).get("do_lower_case") is False:
        raise ConvertError("a cased WordPiece vocabulary: llama.cpp's WordPiece tokenizer lowercases")
    tensors = read_safetensors(source.read("model.safetensors"))
    out = Path(out)
    partial = out.with_name(out.name + ".partial")
    writer = gguf.GGUFWriter(partial, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.BERT])
    write_parameters(writer, config, pooling(source), dtype)
    write_vocabulary(writer, pieces, types, special, config.get("type_vocab_size", 2))
    write_tensors(writer, tensors, config["num_hidden_layers"], dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.replace(out)
    return out


def write_parameters(writer, config: dict, pool: gguf.PoolingType, dtype: str) -> None:
    writer.add_name(config.get("_name_or_path", "bert").split("/")[-1])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_layer_norm_eps(config.get("layer_norm_eps", 1e-12))
    writer.add_causal_attention(False)
    writer.add_pooling_type(pool)
    writer.add_file_type(FILE_TYPES[dtype])


def write_vocabulary(writer, pieces, types, special: dict[str, int], type_count: int) -> None:
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(pieces)
    writer.add_token_types(types)
    writer.add_token_type_count(type_count)
    for role, add in (("[CLS]", writer.add_bos_token_id), ("[SEP]", writer.add_sep_token_id),
                      ("[UNK]", writer.add_unk_token_id), ("[PAD]", writer.add_pad_token_id),
                      ("[MASK]", writer.add_mask_token_id)):
        if role in special:
            add(special[role])
    writer.add_add_bos_token(True)   # [CLS] first
    writer.add_add_sep_token(True)   # [SEP] last
    writer.add_add_eos_token(False)


def write_tensors(writer, tensors: dict[str, np.ndarray], n_layers: int, dtype: str) -> None:
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, n_layers)
    for name, array in tensors.items():
        plain = name.removeprefix("bert.")
        if plain.startswith(UNUSED):
            continue
        mapped = names.get_name(plain, try_suffixes=(".weight", ".bias"))
        if mapped is None:
            raise ConvertError(f"tensor {name} has no place in llama.cpp's bert model")
        wide = array.astype(np.float32)
        if dtype == "f32" or wide.ndim != 2 or mapped.startswith(ADDED_AS_IS):
            writer.add_tensor(mapped, wide)
        elif dtype == "f16":
            writer.add_tensor(mapped, wide.astype(np.float16))
        else:
            kind = QUANT_TYPES[dtype]
            writer.add_tensor(mapped, gguf.quants.quantize(wide, kind),
                              raw_dtype=kind)


def main(argv: "list[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="a sentence-transformers model folder, or a zip of one")
    parser.add_argument("out", help="the GGUF file to write")
    parser.add_argument("--type", choices=tuple(FILE_TYPES), default="q8_0",
                        help="the matrices' type (default q8_0)")
    args = parser.parse_args(argv)
    try:
        convert(args.source, args.out, args.type)
    except (ConvertError, OSError, zipfile.BadZipFile) as exc:
        print(f"convert: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
