"""A small real corpus for the retrieval tests: 20 one-sentence passages on distinct topics."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skillrag.data.schema import Passage
from skillrag.retrieval import IndexStats

TOPICS = [
    ("Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris."),
    (
        "Great Wall of China",
        "The Great Wall of China is a series of fortifications built across northern China.",
    ),
    (
        "Photosynthesis",
        "Photosynthesis is the process by which green plants convert sunlight into chemical energy.",
    ),
    ("Mount Everest", "Mount Everest is Earth's highest mountain above sea level, in the Himalayas."),
    ("Amazon River", "The Amazon River in South America is the largest river by discharge volume of water."),
    (
        "Marie Curie",
        "Marie Curie was a physicist and chemist who conducted pioneering research on radioactivity.",
    ),
    (
        "Python (language)",
        "Python is a high-level programming language whose design emphasises code readability.",
    ),
    ("Jupiter", "Jupiter is the fifth planet from the Sun and the largest in the Solar System, a gas giant."),
    (
        "Mona Lisa",
        "The Mona Lisa is a half-length portrait painting by the Italian artist Leonardo da Vinci.",
    ),
    ("Penicillin", "Penicillin was discovered in 1928 by the Scottish scientist Alexander Fleming."),
    ("Sahara", "The Sahara is a desert on the African continent, the largest hot desert in the world."),
    ("Beethoven", "Ludwig van Beethoven was a German composer and pianist of the classical period."),
    ("Titanic", "RMS Titanic was a British ocean liner that sank in the North Atlantic Ocean in 1912."),
    ("Honey bee", "The western honey bee is the most common of the honey bee species worldwide."),
    ("Moon landing", "Apollo 11 was the American spaceflight that first landed humans on the Moon in 1969."),
    ("Chess", "Chess is a board game for two players, played on a square board of sixty-four squares."),
    ("Volcano", "A volcano is a rupture in the crust of a planet that lets hot lava and gases escape."),
    ("Olympic Games", "The modern Olympic Games are international sporting events held every four years."),
    ("Coffee", "Coffee is a beverage brewed from roasted coffee beans, the seeds of Coffea plants."),
    ("Paris", "Paris is the capital and most populous city of France, on the river Seine."),
]


@dataclass(frozen=True)
class BuiltIndex:
    passages: list[Passage]
    corpus_dir: Path
    index_dir: Path
    stats: IndexStats
    dense_dir: Path  # the dense index's own root (skillrag.retrieval.dense.build_dense)


def make_passages() -> list[Passage]:
    return [Passage(id=f"p{i:02d}", title=title, text=text) for i, (title, text) in enumerate(TOPICS)]
