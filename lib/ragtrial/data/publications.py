"""Where each data set was published, what it provides, and how to fetch it: one record per loader
(`PUBLICATIONS`, which `register_loader` puts into `LOADERS` metadata) and one download manifest per
data-root folder (`FOLDERS`).

A manifest lists every file as published: its place in the data set's folder, its origin (a URL at
a pinned commit, or a member of a published archive), its size and sha256, as each folder's
SOURCE.md in the shared data sets records them. A folder of many files is checked as a whole, by
its file count, bytes and folder digest (sha256 over, for each file in sorted path order, its path
in the data set's folder, a NUL byte and its raw sha256 digest; SOURCE.md's definition). A data set
the kit cannot fetch as its loader reads it (gated, or published in another form) has no files and
says what to do instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from ragtrial.config.notebooks import Gold


@dataclass(frozen=True)
class Publication:
    """A loader's data set: the gold its questions carry (`provides`, kinds of `config.notebooks.Gold`,
    for the loader's default options), where it was published, its licence, the data-root
    folders of the published copies it reads (keys of `FOLDERS`; the first is its default folder),
    and whether it may hold no document (`documents_optional`: answers files, query logs, UltraDomain
    without its books).
    """

    provides: tuple[Gold, ...]
    published_at: str
    licence: str
    folders: tuple[str, ...] = ()
    documents_optional: bool = False


@dataclass(frozen=True)
class PublishedFile:
    """One file: `path` in the data set's folder, `source` its URL (or, inside an archive, its
    member's name; a member in a sub-folder of the archive matches too), its size and sha256.
    """

    path: str
    source: str
    size: int
    sha256: str


@dataclass(frozen=True)
class PublishedFolder:
    """A folder of many files checked as a whole: `path` in the data set's folder; `source` the URL
    the `names` are fetched under, or, inside an archive, the members' folder (every file under it);
    its file count, bytes and folder digest.
    """

    path: str
    source: str
    files: int
    size: int
    digest: str
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class PublishedArchive:
    """A zip file whose members are the data: checked by its sha256 where the source recorded it
    (otherwise its parts are the check), then unpacked into `parts`.
    """

    url: str
    parts: tuple[PublishedFile | PublishedFolder, ...]
    size: int | None = None
    sha256: str | None = None


Item = PublishedFile | PublishedFolder | PublishedArchive


@dataclass(frozen=True)
class FolderManifest:
    """How to fetch one data-root folder: its `items`, or, when the kit cannot fetch it, `instead`
    (what to do, naming the source); `note` is printed after a download.
    """

    name: str
    description: str
    items: tuple[Item, ...] = ()
    instead: str = ""
    note: str = ""

    @property
    def size(self) -> int:
        return sum(part.size for part in published_parts(self))


def published_parts(manifest: FolderManifest) -> list[PublishedFile | PublishedFolder]:
    """Every file and folder the manifest puts into the data set's folder, archives unpacked."""
    return [
        part
        for item in manifest.items
        for part in (item.parts if isinstance(item, PublishedArchive) else (item,))
    ]


def github(repo: str, commit: str, path: str) -> str:
    """The raw URL of `path` in GitHub repository `repo` at `commit`."""
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{quote(path)}"


def _files(repo: str, commit: str, files: dict[str, tuple[str, int, str]]) -> tuple[PublishedFile, ...]:
    """`{path here: (path in the repository, size, sha256)}` as files of `repo` at `commit`."""
    return tuple(
        PublishedFile(path, github(repo, commit, origin), size, sha)
        for path, (origin, size, sha) in files.items()
    )


_HIPPORAG = "OSU-NLP-Group/HippoRAG"
_HIPPORAG_LEGACY = "b144c46df14cabe5f5822d8caded4bec5f709461"  # branch legacy: HippoRAG v1's data/
_HIPPORAG_LICENSE = ("LICENSE", 1_088, "05b8ae666b03e1a86252324c5207b872b37272c3c47cbc3f27b19debd35597cf")
_GRAPHRAG_BENCHMARKS = (
    "microsoft/graphrag-benchmarking-datasets",
    "bc187ace7ccc2c942155f1160a892a3ccb257179",
)
_ODSUM = ("yale-nlp/ODSum", "f056912eb85fdcba5f807ce99bca930cc8d4ad97")
_GRAPHRAG = ("microsoft/graphrag", "6dad6d2b059589624035714d8dcfde94ecc0a5fb")
_DULCE = "docs/examples_notebooks/inputs/operation dulce"

# fast-graphrag's published retrieval outputs of its four systems (VectorDB, LightRAG local,
# nano-graphrag local, Circlemind), `benchmarks/results/<system>/<file>` saved as `<system>_<file>`.
_FASTGRAPHRAG_RESULTS = "fastgraphrag_benchmark_results"
_FASTGRAPHRAG_PUBLISHED_RESULTS = {
    "LICENSE.fast-graphrag": (
        "LICENSE",
        1_070,
        "1774ff2102ad79d99d731ed90e1f64116695115133efd78c29a73d2939033875",
    ),
    "UPSTREAM_BENCHMARKS_README.md": (
        "benchmarks/README.md",
        4_740,
        "44f17a0da0d331423bfef170b994537dacc5fd3ef159e0eaa85f68b4d750e040",
    ),
    "graph_2wikimultihopqa_101.json": (
        "benchmarks/results/graph/2wikimultihopqa_101.json",
        56_795,
        "09ead0aad31db179143dbfaf58efb4201a259eb3768077a927713c993f0b058d",
    ),
    "graph_2wikimultihopqa_51.json": (
        "benchmarks/results/graph/2wikimultihopqa_51.json",
        28_471,
        "fad0a6850f1c4c22fcfa7d66954d5cec654c16ecdc2b87c0103984f388df14e0",
    ),
    "lightrag_2wikimultihopqa_101_local.json": (
        "benchmarks/results/lightrag/2wikimultihopqa_101_local.json",
        55_241,
        "325a997ad29de6bb8c2c27109531c5fc750b2eee58ee02b0f4d02ed2bdf1eeac",
    ),
    "lightrag_2wikimultihopqa_51_local.json": (
        "benchmarks/results/lightrag/2wikimultihopqa_51_local.json",
        27_649,
        "e0e8642ec364d87d141b79e948904fa486cb229cc208a0ae1e26a4b403b23d1b",
    ),
    "nano_2wikimultihopqa_101_local.json": (
        "benchmarks/results/nano/2wikimultihopqa_101_local.json",
        54_230,
        "e4db7d94d95ac86e23a960e8d28892b4a9ab9cdca5dc977870103a6ac6d16373",
    ),
    "nano_2wikimultihopqa_51_local.json": (
        "benchmarks/results/nano/2wikimultihopqa_51_local.json",
        26_813,
        "f90484c3faf87b5e2fdc230c642d2f741ec216172a093e49040d83fb09729fee",
    ),
    "vdb_2wikimultihopqa_101.json": (
        "benchmarks/results/vdb/2wikimultihopqa_101.json",
        57_069,
        "650d6b0e220355b82b1f6cb51429cccae7fe96773ab57d6f6dbad6d2343e57c6",
    ),
    "vdb_2wikimultihopqa_51.json": (
        "benchmarks/results/vdb/2wikimultihopqa_51.json",
        28_448,
        "a1bcb654b9196b66182a3eefb4e1caedae0c9530f9b9aed8c5d0740dab0b22b3",
    ),
}

# The 232 meeting transcripts of ODSum's Meeting set (data/Meeting/raw/Documents/<id>.txt).
_ODSUM_MEETINGS = """
Bdb001 Bed002 Bed003 Bed004 Bed005 Bed006 Bed008 Bed009 Bed010 Bed011 Bed012 Bed013 Bed014 Bed015
Bed016 Bed017 Bmr003 Bmr005 Bmr006 Bmr007 Bmr009 Bmr010 Bmr011 Bmr012 Bmr013 Bmr014 Bmr015 Bmr016
Bmr018 Bmr019 Bmr020 Bmr023 Bmr024 Bmr025 Bmr026 Bmr027 Bro003 Bro004 Bro005 Bro007 Bro008 Bro010
Bro011 Bro012 Bro013 Bro014 Bro016 Bro017 Bro018 Bro019 Bro021 Bro022 Bro023 Bro024 Bro025 Bro026
Bro027 Bro028 Buw001 ES2002a ES2002b ES2002c ES2002d ES2003a ES2003b ES2003c ES2003d ES2004a ES2004b
ES2004c ES2004d ES2005a ES2005b ES2005c ES2005d ES2006a ES2006b ES2006c ES2006d ES2007a ES2007b
ES2007c ES2007d ES2008a ES2008b ES2008c ES2008d ES2009a ES2009b ES2009c ES2009d ES2010a ES2010b
ES2010c ES2010d ES2011a ES2011b ES2011c ES2011d ES2012a ES2012b ES2012c ES2012d ES2013a ES2013b
ES2013c ES2013d ES2014a ES2014b ES2014c ES2014d ES2015a ES2015b ES2015c ES2015d ES2016a ES2016b
ES2016c ES2016d IS1000a IS1000b IS1000c IS1000d IS1001a IS1001b IS1001c IS1001d IS1002b IS1002c
IS1002d IS1003a IS1003b IS1003c IS1003d IS1004a IS1004b IS1004c IS1004d IS1005a IS1005b IS1005c
IS1006a IS1006b IS1006c IS1006d IS1007a IS1007b IS1007c IS1007d IS1008a IS1008b IS1008c IS1008d
IS1009a IS1009b IS1009c IS1009d TS3003a TS3003b TS3003c TS3003d TS3004a TS3004b TS3004c TS3004d
TS3005a TS3005b TS3005c TS3005d TS3006a TS3006b TS3006c TS3006d TS3007a TS3007b TS3007c TS3007d
TS3008a TS3008b TS3008c TS3008d TS3009a TS3009b TS3009c TS3009d TS3010a TS3010b TS3010c TS3010d
TS3011a TS3011b TS3011c TS3011d TS3012a TS3012b TS3012d covid_0 covid_1 covid_10 covid_2 covid_3
covid_4 covid_5 covid_6 covid_7 covid_8 covid_9 education_0 education_1 education_10 education_11
education_12 education_13 education_14 education_15 education_16 education_17 education_18
education_19 education_2 education_20 education_21 education_22 education_23 education_24
education_3 education_4 education_5 education_6 education_7 education_8 education_9
"""

FOLDERS: dict[str, FolderManifest] = {
    manifest.name: manifest
    for manifest in (
        FolderManifest(
            "multihop_rag",
            "MultiHop-RAG: 609 news articles, 2,556 queries",
            (
                # The authors' repository keeps both files in Git LFS; this re-export of their Hugging Face
                # data set (load_dataset + json.dump) is what the shared copy holds, members renamed.
                PublishedArchive(
                    github(
                        "Programmer7129/vrin-benchmarks",
                        "5b2f11af6ee4e76e5026f7892b853b406b8398ba",
                        "multihop_rag/data/data.zip",
                    ),
                    (
                        PublishedFile(
                            "corpus.json",
                            "corpus_train.json",
                            6_664_110,
                            "dc0e25579a3d222cda19ce4d7dd03c291dfe21069c9a89f0af2b98289ea34d2f",
                        ),
                        PublishedFile(
                            "MultiHopRAG.json",
                            "queries_train.json",
                            4_665_375,
                            "7fa4f7626032e0c5745270979ea09f80e4c493d97d7ab1c2537b66da41070a7d",
                        ),
                    ),
                    size=3_456_553,
                    sha256="280888c1ffe5b836b5b07291dfeb19085c4c50836106edaa1a5cc13a8a01bfa1",
                ),
                *_files(
                    "Programmer7129/vrin-benchmarks",
                    "5b2f11af6ee4e76e5026f7892b853b406b8398ba",
                    {
                        "dataset_info.json": (
                            "multihop_rag/dataset_info.json",
                            398,
                            "08b6e82a5d3f7f765c1fccc84bc2a7de876ab7a6ad50454e8e6f4be16cabd616",
                        )
                    },
                ),
                *_files(
                    "yixuantt/MultiHop-RAG",
                    "3dd4d4e79fc9843008b8f832da99086a82f1a805",
                    {
                        "UPSTREAM_README.md": (
                            "README.md",
                            2_091,
                            "05c2fd7fc24d7c2698cb2381232f213416327871fbd30e04a1493e1bcaa7ed42",
                        )
                    },
                ),
            ),
            note="the articles and queries come from a third-party re-export (GitHub Programmer7129/"
            "vrin-benchmarks) of the authors' Hugging Face data set yixuantt/MultiHopRAG, whose own GitHub "
            "files are Git LFS objects",
        ),
        FolderManifest(
            "musique_sample_hipporag",
            "MuSiQue: HippoRAG's 100-question train sample, its 1,890 passages and their OpenIE graph",
            _files(
                _HIPPORAG,
                _HIPPORAG_LEGACY,
                {
                    "musique_train.json": (
                        "data/musique_train.json",
                        1_179_088,
                        "bca674746844637f5c68408a96b67bc0542d98e7c53715f3acafe144bd5e4ff4",
                    ),
                    "musique_train_corpus.json": (
                        "data/musique_train_corpus.json",
                        974_514,
                        "79845dd085f9df49c8ce440208763e2611aeb86c81ee0bdad2094504381bb651",
                    ),
                    "openie_graph/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json": (
                        "output/openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json",
                        3_344_000,
                        "4258bcc89bb20bb5c20e6700b87e21063521a6c3ef5a136ab0d0d7c0ea237585",
                    ),
                    "LICENSE.HippoRAG-MIT": _HIPPORAG_LICENSE,
                },
            )
            + _files(
                "StonyBrookNLP/musique",
                "922ac98f19a201998dbdae6d7f2887a5258dbdeb",
                {
                    "LICENSE.MuSiQue-CC-BY-4.0": (
                        "LICENSE",
                        18_652,
                        "cce5d01fa4a83b794271bd2c28cffdf99afd43c803e6ddefddae39b591ea7448",
                    )
                },
            ),
            note="index.import_path musique_sample_hipporag/openie_graph/"
            "openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json imports HippoRAG's graph",
        ),
        FolderManifest(
            "hotpotqa_sample_hipporag",
            "HotpotQA: HippoRAG's 100-question train sample and its 994 articles",
            _files(
                _HIPPORAG,
                _HIPPORAG_LEGACY,
                {
                    "hotpotqa_train.json": (
                        "data/hotpotqa_train.json",
                        810_836,
                        "6c0e2689d03c94b3bb4d5f94ed806ea4f4eb4f46c12132f8e91df774ad5c5a22",
                    ),
                    "hotpotqa_train_corpus.json": (
                        "data/hotpotqa_train_corpus.json",
                        640_159,
                        "2671af600095eabc5b3f3bc3728861682f14fcced84ef1386509a8ae92647f88",
                    ),
                    "LICENSE.HippoRAG-MIT": _HIPPORAG_LICENSE,
                },
            )
            + _files(
                "hotpotqa/hotpot",
                "3635853403a8735609ee997664e1528f4480762a",
                {
                    "LICENSE.hotpot-repo-Apache-2.0.txt": (
                        "LICENSE.txt",
                        11_338,
                        "9c264489d021e5905c0544f75e292c63f78dca56acd2aec395dd36dcc41940c7",
                    )
                },
            ),
        ),
        FolderManifest(
            "2wikimultihopqa_hipporag",
            "2WikiMultihopQA: HippoRAG's 6,119 passages and fast-graphrag's 101 questions with gold titles",
            _files(
                _HIPPORAG,
                "c617143f01477243992a63b2e2151cc003dd3b21",
                {
                    "2wikimultihopqa_corpus.json": (
                        "reproduce/dataset/2wikimultihopqa_corpus.json",
                        3_083_943,
                        "9d6e352952aafb18dab22bf8195039461321a44a949df902ae83bce134ad238a",
                    ),
                    "LICENSE.HippoRAG-MIT": (
                        "LICENSE",
                        1_088,
                        "93b43d692b033b76129504448695bfe76ef22d18b11e51352bfab4b5622e5aaa",
                    ),
                },
            )
            + _files(
                "circlemind-ai/fast-graphrag",
                "23b3a1bef64338faf9f35c521a20465dbd09419f",
                {
                    "fastgraphrag_vdb_results_101_with_gold_titles.json": (
                        "benchmarks/results/vdb/2wikimultihopqa_101.json",
                        57_069,
                        "650d6b0e220355b82b1f6cb51429cccae7fe96773ab57d6f6dbad6d2343e57c6",
                    ),
                    "fastgraphrag_questions_101.json": (
                        "benchmarks/questions/2wikimultihopqa_101.json",
                        5_734,
                        "fbab87ae9cc278e4832a26d28fa3891e7d8355316c385be5fc139840d9cf924b",
                    ),
                    "fastgraphrag_questions_51.json": (
                        "benchmarks/questions/2wikimultihopqa_51.json",
                        3_039,
                        "792915ac4edebd8f3b98077020fcb1d196e56a8f25cd081266101f6eb591b380",
                    ),
                    "LICENSE.fast-graphrag": (
                        "LICENSE",
                        1_070,
                        "1774ff2102ad79d99d731ed90e1f64116695115133efd78c29a73d2939033875",
                    ),
                },
            )
            + _files(
                "circlemind-ai/fast-graphrag",
                "23b3a1bef64338faf9f35c521a20465dbd09419f",
                {
                    f"{_FASTGRAPHRAG_RESULTS}/{here}": published
                    for here, published in _FASTGRAPHRAG_PUBLISHED_RESULTS.items()
                },
            )
            + _files(
                "Alab-NII/2wikimultihop",
                "13800e5be57df1b4040b9b1588c6c811779e69e9",
                {
                    "LICENSE.2WikiMultihopQA": (
                        "LICENSE",
                        11_337,
                        "b8c1d7752e71597a45121774b6be93df38a81e1b748be15c063c0759f11e00ea",
                    )
                },
            ),
        ),
        FolderManifest(
            "qmsum",
            "QMSum: the test split, 35 meetings and 281 queries",
            _files(
                "Yale-LILY/QMSum",
                "83d7768c1f2b4dfeb091385d3dc7e239b8e5bb7e",
                {
                    "test.jsonl": (
                        "data/ALL/jsonl/test.jsonl",
                        2_746_108,
                        "6bcd428211260ad2efae3af76cbaf6a7f5ae4bb5e1e59c45a4b8e89539cb9208",
                    ),
                    "LICENSE": (
                        "LICENSE",
                        1_066,
                        "8308d90c6321345cbd4adc8b479ddbece28ddbdca44f3f0b9bf033c3999a4a80",
                    ),
                    "UPSTREAM_README.md": (
                        "README.md",
                        5_959,
                        "b3b08634fe1cafc16ba6d5a4d26deb25c43cd2e676fed28921323195ce3592b2",
                    ),
                },
            ),
        ),
        FolderManifest(
            "squality",
            "SQuALITY v1.3: the test split, 52 stories and 260 questions with 4 reference summaries each",
            _files(
                "nyu-mll/SQuALITY",
                "dc08d4f574639d773bc64ef3ab3527043108fb4e",
                {
                    "test.jsonl": (
                        "data/v1-3/txt/test.jsonl",
                        3_039_248,
                        "5a485f30edebd16367427997ae82fac47bcd9ada9e7755c70a7d6569c0668c9c",
                    ),
                    "LICENSE": (
                        "data/LICENSE",
                        18_650,
                        "7e7170e3cebf88a9f60c7b8421418323c09304da1af4d5e90f4da1dc1c8a2661",
                    ),
                    "GUTENBERG_LICENSE": (
                        "data/GUTENBERG_LICENSE",
                        531,
                        "17e071c01e8610bf3d128f1e228f4946f360ebdea1dc8a5e3b816b1489e65325",
                    ),
                    "UPSTREAM_README.md": (
                        "README.md",
                        3_838,
                        "55c2378c1c182dece34431f9f0fcf6ab25a5e00fe558b12c608fb43d8313ec8e",
                    ),
                },
            ),
        ),
        FolderManifest(
            "odsum",
            "ODSum: the Meeting set (232 transcripts, 436 queries) and the Story test set (52 stories)",
            (
                PublishedFolder(
                    "meeting/documents",
                    github(*_ODSUM, "data/Meeting/raw/Documents"),
                    files=232,
                    size=7_397_111,
                    digest="f876a34ead074b3d858725eccb1adb1a9f89f4d3d5c0f9a707acb0d4f9953e95",
                    names=tuple(f"{stem}.txt" for stem in _ODSUM_MEETINGS.split()),
                ),
                *_files(
                    *_ODSUM,
                    {
                        "meeting/queries.json": (
                            "data/Meeting/raw/queries.json",
                            609_035,
                            "db08a4739d8e4eac354461ed05b9f911b484d9f5e76aa5d1ac483638ba13f99e",
                        ),
                        "story/documents_test.jsonl": (
                            "data/Story/raw/documents/test.jsonl",
                            3_121_590,
                            "5521c91dbd3d48e6251512243d710d7db31ed6495c42c48f98ef5117d55ddac3",
                        ),
                        "story/queries.jsonl": (
                            "data/Story/raw/queries.jsonl",
                            3_607_878,
                            "4d00e41dbbffd410cc7a95744c5e08dc9df249d5bab580442807a66177362213",
                        ),
                        "LICENSE": (
                            "LICENSE",
                            1_065,
                            "f30dea731dc844eb5f1e71755afd05d105442fc4469ca098325bacefea72896b",
                        ),
                        "UPSTREAM_README.md": (
                            "README.md",
                            3_941,
                            "a11406154de188a6ca8073dcb4e476fa3ab3b088954957bdb59788b995584036",
                        ),
                    },
                ),
            ),
            note="data.options.subset: story reads the Story set (default: meeting)",
        ),
        FolderManifest(
            "graphrag_bench",
            "GraphRAG-Bench: the Medical corpus and 2,062 questions; the Novel questions (their corpus is "
            "not in the published repository's files under 4 MiB)",
            _files(
                "GraphRAG-Bench/GraphRAG-Benchmark",
                "e00aa63faf4f4792640c95bf2be5b13a82eb2239",
                {
                    "medical_corpus.json": (
                        "Datas/Corpus/medical.json",
                        1_055_153,
                        "39ba262caf26bbc8070af7f96b48a09d9ed6a249c02837314229f3d783f0a0f6",
                    ),
                    "medical_questions.json": (
                        "Datas/Questions/medical_questions.json",
                        889_409,
                        "c62cee56cf4c0cf9142751f4ac342ce2e6d1a35bdaa3e7666998352158e92c02",
                    ),
                    "novel_questions.json": (
                        "Datas/Questions/novel_questions.json",
                        829_074,
                        "89c3b0561513dc3ae9dc21037602b0ad9b952e52505cff980d58cbfc145cbc18",
                    ),
                    "UPSTREAM_README.md": (
                        "README.md",
                        2_200,
                        "1840bf86316df213fab7ae2e11a3cfac991a1e2c64382d9b2c10b959ceef60ea",
                    ),
                },
            ),
            note="the Novel subset also needs novel_corpus.json (upstream Datas/Corpus/novel.json), saved "
            "into this folder by hand",
        ),
        FolderManifest(
            "graphrag_paper_podcast_msft",
            "GraphRAG paper data: the Behind the Tech podcast (1,669 transcript parts, 125 global questions) "
            "and 41 Microsoft earnings calls with 41 questions",
            (
                # SOURCE.md records only the ends of the zips' sha256, so their unpacked files are the check.
                PublishedArchive(
                    github(*_GRAPHRAG_BENCHMARKS, "data/Kevin Scott Podcast Transcripts Input Text.zip"),
                    (
                        PublishedFolder(
                            "kevin_scott_podcast/input",
                            "input",
                            files=1669,
                            size=4_352_981,
                            digest="0ded60852b92d8d1a776c99ba5b2aaf76fe3f7f81511f1f18e1346a3dc1a1920",
                        ),
                    ),
                ),
                PublishedArchive(
                    github(*_GRAPHRAG_BENCHMARKS, "data/MSFT Input Text.zip"),
                    (
                        PublishedFolder(
                            "msft_earnings/input",
                            "txt",
                            files=41,
                            size=2_225_824,
                            digest="e336642bfdcbb9293f45ed63d601dafdab7e64ac37f939f1c101ae77faa9a405",
                        ),
                    ),
                ),
                *_files(
                    *_GRAPHRAG_BENCHMARKS,
                    {
                        "kevin_scott_podcast/questions.csv": (
                            "data/Kevin Scott Questions.csv",
                            15_610,
                            "a85e51e2da0576c950134f2f564b3dc73cbae8eb2273442e75da4e6710fa2576",
                        ),
                        "msft_earnings/questions_multi_transcript.csv": (
                            "data/MSFT Multi Transcript Questions.csv",
                            1_530,
                            "17f32b02a3ec8ad1751df4b453e9b67b7efc7ce58a4fb25e98c5fbd9b56b56c9",
                        ),
                        "msft_earnings/questions_single_transcript.csv": (
                            "data/MSFT Single Transcript Questions.csv",
                            2_044,
                            "b61bca08c45cf2fa55ed83ab68573b9bf0a71e9fcf53afc952928dd52717176c",
                        ),
                        "hotpotqa_filtered/questions.csv": (
                            "data/HotPotQA Filtered Questions.csv",
                            657_653,
                            "d6064d2af399cd27e1248384614260611d8668459b27e4338d9d099b8277733f",
                        ),
                        "LICENSE": (
                            "LICENSE",
                            2_370,
                            "9d242f2775d7a1d61249e49ed08bfcca3d8759782ad4bfdaa6dcfff830765054",
                        ),
                        "NOTICE.md": (
                            "NOTICE.md",
                            1_808,
                            "4b5309b54dc5d09fb12b920c0389a2c52d645db2c66b4c47ec5de2dbcd2d4564",
                        ),
                        "UPSTREAM_README.md": (
                            "README.md",
                            4_710,
                            "272499f280b900fc3a0aeb8f46afda72f5686d473cc6a8d982d84069efee08a4",
                        ),
                    },
                ),
            ),
            note="data.options.subset: msft_earnings reads the earnings calls (default: podcast)",
        ),
        FolderManifest(
            "ultradomain_cs_questions_kag",
            "UltraDomain cs: 100 questions with reference answers and LightRAG's answers (KAG); no books",
            _files(
                "OpenSPG/KAG",
                "e1012d39e41900bb9b0d0b01fbd1a2fdd409ee37",
                {
                    "questions.json": (
                        "kag/examples/csqa/solver/data/questions.json",
                        71_735,
                        "f25dfeb4b02c231770c7ca8a460c16304beecce7ce0b4e8ca224b5d55e5370d1",
                    ),
                    "csqa_lightrag_answers.json": (
                        "kag/examples/csqa/solver/data/csqa_lightrag_answers.json",
                        397_912,
                        "fb3187c47e879104c126dd4d81f93cc8a1c56e22795f290e71071aab3e1e450f",
                    ),
                    "UPSTREAM_README_kag_csqa.md": (
                        "kag/examples/csqa/README.md",
                        2_529,
                        "05a5ed9ecad245a51a6b493aa5d9cc8496406cbdac5493f36ff9a6213913411c",
                    ),
                    "LICENSE.KAG": (
                        "LICENSE",
                        11_357,
                        "c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4",
                    ),
                },
            ),
            note="the 10 books (in copyright) are not fetched: they are in OpenSPG/KAG at commit "
            "e1012d39e41900bb9b0d0b01fbd1a2fdd409ee37, kag/examples/csqa/builder/data/*.md; "
            "data.options.corpus_path names a folder holding them. methods.answer_files reads "
            "csqa_lightrag_answers.json (params/byo_ultradomain_lightrag.yaml)",
        ),
        FolderManifest(
            "gutenberg_christmas_carol",
            "A Christmas Carol (Project Gutenberg eBook #24022) as one text file, the book of GraphRAG's "
            "getting-started guide",
            _files(
                "gusye1234/nano-graphrag",
                "01f429e8c562e8f19b2449f90cec9a4a67d4f6ee",
                {
                    "a_christmas_carol_pg24022.txt": (
                        "tests/mock_data.txt",
                        189_225,
                        "3a3c04f570f9d28f27b9a0946cc97966cf174354ab5b0d85247b566384e2f5e3",
                    ),
                    "LICENSE.nano-graphrag-MIT": (
                        "LICENSE",
                        1_067,
                        "e76d815cd0c0da9d13ab946ab7c07fb914b791f026822ded5e3477ed3d959cd9",
                    ),
                },
            ),
            note="GraphRAG's own index of this text is in the folder graphrag_examples",
        ),
        FolderManifest(
            "graphrag_examples",
            "Microsoft GraphRAG's pre-built indexes (parquet) of A Christmas Carol and of Operation Dulce, "
            "with Dulce's text",
            _files(
                *_GRAPHRAG,
                {
                    **{
                        f"a_christmas_carol_index/output/{table}.parquet": (
                            f"tests/verbs/data/{table}.parquet",
                            size,
                            sha,
                        )
                        for table, size, sha in (
                            (
                                "communities",
                                71_503,
                                "5c5dfa26669cfa22674dab82b756d90dd1f9729bc1b02ad2ed4faa0a4dc06a50",
                            ),
                            (
                                "community_reports",
                                894_887,
                                "f4a19c6f490a985c3178d687d42ccfd48e21bcd59966174b9d61e4f99c36b790",
                            ),
                            (
                                "covariates",
                                137_091,
                                "79efa8a6f038ee588127a023eac397e350cae2088f9a54990c09b2a818cf3464",
                            ),
                            (
                                "documents",
                                125_443,
                                "dd829f88042e9651d426988415a7fa5906763f06c3b1db9628272873988ac499",
                            ),
                            (
                                "entities",
                                119_565,
                                "fb35aabc4cda5254ff09d5c214944796b0590dda6cc105985b7759276bb12c3f",
                            ),
                            (
                                "relationships",
                                126_576,
                                "982e045772574569d4d4a2b4a7b3f98e8fa0b6773837765cb63964b69931ece0",
                            ),
                            (
                                "text_units",
                                202_236,
                                "df68d61b1bffa75601927ab7518b7a4c061b11c32d4eea8542cb2e87f4b621f5",
                            ),
                        )
                    },
                    **{
                        f"operation_dulce/output/{table}.parquet": (f"{_DULCE}/{table}.parquet", size, sha)
                        for table, size, sha in (
                            (
                                "communities",
                                14_094,
                                "d4bc1fda29273b6a035a893c328ec6a67cfd41e025cd2bb8a2d26b6486b25596",
                            ),
                            (
                                "community_reports",
                                88_785,
                                "6087721003fae48aae0393cdf46f7100daa1543b1d82e9bc6cc718a209dd2c47",
                            ),
                            (
                                "covariates",
                                26_494,
                                "ad518489478de8146f753e6655f8a00788c18eaac58fbf6e282d9bde2a46261c",
                            ),
                            (
                                "documents",
                                23_064,
                                "36fb42688aa2e2b232942d18b9cf0ec7f1184589e3d4def713e64d3e893661d1",
                            ),
                            (
                                "embeddings.community_full_content",
                                220_010,
                                "62408443707c97cdac7c63a7cd223fb430f93bd1da0cc4f5f3c9b8325107b3ef",
                            ),
                            (
                                "entities",
                                19_483,
                                "05d7b8e335d17f932f0d9427f1f82a978bf2c105697655fdecd6e6c736228a35",
                            ),
                            (
                                "relationships",
                                21_686,
                                "4fb1081eb919ae18b90384eaccd892047d4c18071ae8f19387d2f53f47bec884",
                            ),
                            (
                                "text_units",
                                30_769,
                                "e47a7f7355ae21ceef029666f6ce5a4d4e6c4a96471685ec1bdd92deb849be74",
                            ),
                        )
                    },
                    "operation_dulce/ABOUT.md": (
                        f"{_DULCE}/ABOUT.md",
                        176,
                        "fe4248b1215961b34f14ab5806359ff11b786c61ba77403257acddc05761ff72",
                    ),
                    "operation_dulce/input/Operation Dulce v2 1 1.md": (
                        f"{_DULCE}/Operation Dulce v2 1 1.md",
                        123_461,
                        "ba95fb002daffe8e6793d06461111f11327916c955fddc812776670599441093",
                    ),
                    "operation_dulce/input/dulce.txt": (
                        "tests/fixtures/text/input/dulce.txt",
                        23_600,
                        "19d8c5301ebbda5693566511fc42f25f59035b433f8c2efb3f8209f325e2bbd5",
                    ),
                    "LICENSE": (
                        "LICENSE",
                        1_141,
                        "c2cfccb812fe482101a8f04597dfc5a9991a6b2748266c47ac91b6a5aae15383",
                    ),
                },
            ),
            note="index.import_path graphrag_examples/a_christmas_carol_index (its text: data.path "
            "gutenberg_christmas_carol) or graphrag_examples/operation_dulce (its text: data.path "
            "graphrag_examples/operation_dulce/input with data.options.patterns [dulce.txt]) imports "
            "GraphRAG's graph, as params/default.yaml's notebook-11 run does",
        ),
        FolderManifest(
            "natural_questions",
            "Natural Questions, simplified training set",
            instead="the simplified training set is one gzipped JSON Lines file of several gigabytes, "
            "published without a checksum: fetch "
            "https://storage.googleapis.com/natural_questions/v1.0-simplified/simplified-nq-train.jsonl.gz "
            "(gs://natural_questions/v1.0-simplified/), unzip it into this folder as "
            "simplified-nq-train.jsonl (`gunzip -c … | head -n 1000 > simplified-nq-train.jsonl` keeps a "
            "slice), then set data.path to the folder",
        ),
        FolderManifest(
            "novelqa",
            "NovelQA: books and their questions",
            instead="NovelQA is gated on Hugging Face (NovelQA/NovelQA): accept its terms there, then "
            "download it with your own token (`huggingface-cli download NovelQA/NovelQA --repo-type "
            "dataset --local-dir <folder>`), keeping its Books/<part>/ and Data/<part>/ folders; its "
            "copyright-protected novels may not be redistributed",
        ),
    )
}

_HIPPORAG_PACKAGING = "MIT (HippoRAG's packaging)"

PUBLICATIONS: dict[str, Publication] = {
    "multihop_rag": Publication(
        ("questions", "answers", "gold passages"),
        "Tang & Yang, 'MultiHop-RAG: Benchmarking Retrieval-Augmented Generation for Multi-Hop Queries' "
        "(COLM 2024, arXiv:2401.15391); GitHub yixuantt/MultiHop-RAG, Hugging Face dataset "
        "yixuantt/MultiHopRAG.",
        "ODC-BY 1.0 (the articles are third-party news content)",
        ("multihop_rag",),
    ),
    "musique": Publication(
        ("questions", "answers", "gold passages", "gold entities"),
        "Trivedi et al., 'MuSiQue: Multihop Questions via Single-hop Question Composition' (TACL 2022); "
        "GitHub StonyBrookNLP/musique. The 100-question train sample and its corpus come from GitHub "
        "OSU-NLP-Group/HippoRAG (legacy branch; Gutierrez et al., HippoRAG, NeurIPS 2024).",
        f"CC BY 4.0 (MuSiQue); {_HIPPORAG_PACKAGING}; passages from Wikipedia (CC BY-SA)",
        ("musique_sample_hipporag",),
    ),
    "hotpotqa": Publication(
        ("questions", "answers", "gold passages", "gold entities"),
        "Yang et al., 'HotpotQA: A Dataset for Diverse, Explainable Multi-hop Question Answering' "
        "(EMNLP 2018); hotpotqa.github.io, GitHub hotpotqa/hotpot. The 100-question train sample and its "
        "corpus come from GitHub OSU-NLP-Group/HippoRAG (legacy branch).",
        f"CC BY-SA 4.0 (HotpotQA data; its code Apache 2.0); {_HIPPORAG_PACKAGING}",
        ("hotpotqa_sample_hipporag",),
    ),
    "2wikimultihopqa": Publication(
        ("questions", "gold passages", "gold entities"),
        "Ho et al., 'Constructing A Multi-hop QA Dataset for Comprehensive Evaluation of Reasoning Steps' "
        "(COLING 2020); GitHub Alab-NII/2wikimultihop. Corpus from GitHub OSU-NLP-Group/HippoRAG; the 101 "
        "questions with gold titles (no answer strings) from GitHub circlemind-ai/fast-graphrag benchmarks.",
        "Apache 2.0 (2WikiMultihopQA); MIT (HippoRAG, fast-graphrag); passages from Wikipedia (CC BY-SA)",
        ("2wikimultihopqa_hipporag",),
    ),
    "qmsum": Publication(
        ("questions", "gold passages", "reference summaries"),
        "Zhong et al., 'QMSum: A New Benchmark for Query-based Multi-domain Meeting Summarization' "
        "(NAACL 2021); GitHub Yale-LILY/QMSum.",
        "MIT (the AMI and ICSI transcripts CC BY 4.0)",
        ("qmsum",),
    ),
    "squality": Publication(
        ("questions", "gold passages", "reference summaries"),
        "Wang et al., 'SQuALITY: Building a Long-Document Summarization Dataset the Hard Way' (EMNLP 2022); "
        "GitHub nyu-mll/SQuALITY (v1.3).",
        "stories: Project Gutenberg licence (public domain in the US); summaries: CC BY 4.0",
        ("squality",),
    ),
    "odsum": Publication(
        ("questions", "gold passages", "reference summaries"),
        "Zhou et al., 'ODSum: New Benchmarks for Open Domain Multi-Document Summarization' "
        "(arXiv:2309.08960, 2023); GitHub yale-nlp/ODSum.",
        "MIT (plus the QMSum and SQuALITY terms)",
        ("odsum",),
    ),
    "graphrag_bench": Publication(
        ("questions", "answers", "gold passages"),
        "Xiang et al., 'When to use Graphs in RAG: A Comprehensive Analysis for Graph Retrieval-Augmented "
        "Generation' (arXiv:2506.05690, 2025); GitHub GraphRAG-Bench/GraphRAG-Benchmark, leaderboard "
        "graphrag-bench.github.io.",
        "none stated (cite the paper)",
        ("graphrag_bench",),
    ),
    "graphrag_podcast": Publication(
        ("questions",),
        "Edge et al., 'From Local to Global: A Graph RAG Approach to Query-Focused Summarization' "
        "(arXiv:2404.16130, 2024) for the podcast transcripts and global questions; the MSFT earnings "
        "subset accompanies arXiv:2503.02922; GitHub microsoft/graphrag-benchmarking-datasets.",
        "CDLA-Permissive-2.0 (its HotPotQA-derived part CC BY-SA 4.0)",
        ("graphrag_paper_podcast_msft",),
    ),
    "natural_questions": Publication(
        ("questions", "answers", "gold passages"),
        "Kwiatkowski et al., 'Natural Questions: A Benchmark for Question Answering Research' (TACL 2019); "
        "GitHub google-research-datasets/natural-questions, simplified training set "
        "gs://natural_questions/v1.0-simplified/simplified-nq-train.jsonl.gz. Single-hop QA in Han et "
        "al., 'RAG vs. GraphRAG: A Systematic Evaluation and Key Insights'.",
        "CC BY-SA 3.0 (Wikipedia pages)",
        ("natural_questions",),
    ),
    "novelqa": Publication(
        # the public release withholds the gold answers (scored on Codabench)
        ("questions", "gold passages"),
        "Wang et al., 'NovelQA: A Benchmark for Long-Range Novel Question Answering' (arXiv:2403.12766, "
        "2024); Hugging Face dataset NovelQA/NovelQA (gated), GitHub NovelQA/novelqa.github.io; gold "
        "answers withheld (Codabench). Used by Han et al., 'RAG vs. GraphRAG'.",
        "Apache 2.0 (the copyright-protected novels for evaluation only, not to be redistributed)",
        ("novelqa",),
    ),
    "query_log": Publication(
        ("questions",),
        "A local production query log (CSV or JSON Lines of questions): no publication; the questions "
        "carry no gold. Sampled into a test set as seed 004 describes (FalkorDB, 'GraphRAG Evaluation: "
        "How to Test Retrieval Quality Before You Ship').",
        "your own data",
        documents_optional=True,
    ),
    "ultradomain": Publication(
        ("questions", "answers"),
        "Qian et al., 'MemoRAG: Moving towards Next-Gen RAG Via Memory-Inspired Knowledge Discovery' "
        "(arXiv:2409.05591, 2024), Hugging Face dataset TommyChien/UltraDomain; the cs questions with "
        "LightRAG answers from GitHub OpenSPG/KAG (kag/examples/csqa); used by Guo et al., 'LightRAG' "
        "(arXiv:2410.05779).",
        "Apache 2.0 (KAG); the cs books are third-party copyrighted works, not fetched",
        ("ultradomain_cs_questions_kag",),
        documents_optional=True,
    ),
    "answers_file": Publication(
        ("questions",),
        "Any local answers file (bring your own answers, ragtrial.data.answer_files): the questions it "
        "answers; no publication.",
        "your own data",
        documents_optional=True,
    ),
    "text_folder": Publication(
        (),
        "Any local folder of .txt/.md files. The kit's example is A Christmas Carol (Project Gutenberg "
        "eBook #24022), as nano-graphrag ships it (GitHub gusye1234/nano-graphrag, tests/mock_data.txt).",
        "your own data; the example: public domain in the US, Project Gutenberg licence",
        ("gutenberg_christmas_carol",),
    ),
}
