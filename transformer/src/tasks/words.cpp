// SPDX-License-Identifier: Apache-2.0
// Built-in word lists (our own) and the random keys/values of the NIAH tasks.
#include <bosch/error.hpp>
#include <bosch/tasks/words.hpp>

#include <boost/random/uniform_int_distribution.hpp>

#include <array>
#include <cstdint>
#include <cstdio>

namespace bosch::tasks {
namespace {

constexpr std::string_view kAdjectives[] = {
    "able", "absent", "acid", "active", "actual", "afraid", "agile", "alert", "alive", "amber",
    "ample", "ancient", "angry", "annual", "anxious", "arctic", "arid", "ashen", "awake", "awful",
    "bad", "bald", "basic", "bent", "big", "bitter", "blank", "bleak", "blind", "blond",
    "blue", "blunt", "bold", "bony", "bored", "brave", "brief", "bright", "brisk", "broad",
    "broken", "brown", "bumpy", "busy", "calm", "candid", "careful", "casual", "cheap", "cheerful",
    "chief", "chilly", "civil", "clean", "clear", "clever", "close", "cloudy", "clumsy", "coarse",
    "cold", "common", "cool", "crimson", "cosy", "crazy", "crisp", "crooked", "cruel", "curious",
    "curly", "cute", "damp", "dark", "dear", "decent", "deep", "dense", "dim", "direct",
    "dirty", "distant", "dizzy", "dry", "dull", "dusty", "eager", "early", "easy", "elder",
    "empty", "equal", "even", "exact", "faint", "fair", "false", "famous", "fancy", "fast",
    "fat", "fierce", "final", "fine", "firm", "first", "fit", "flat", "fluffy", "fond",
    "formal", "frank", "free", "fresh", "friendly", "frozen", "full", "funny", "gentle", "giant",
    "glad", "golden", "good", "grand", "grateful", "gray", "great", "green", "grim", "gross",
    "handy", "happy", "hard", "harsh", "heavy", "hidden", "high", "hollow", "holy", "honest",
    "hot", "huge", "humble", "hungry", "icy", "idle", "ill", "immense", "inner", "ivory",
    "jolly", "juicy", "keen", "kind", "large", "late", "lazy", "lean", "legal", "level",
    "light", "little", "live", "lively", "local", "lonely", "long", "loose", "loud", "lovely",
    "low", "loyal", "lucky", "mad", "magic", "main", "major", "mellow", "merry", "mild",
    "minor", "misty", "modern", "modest", "moist", "muddy", "narrow", "nasty", "native", "neat",
    "nervous", "new", "nice", "noble", "noisy", "normal", "odd", "old", "open", "orange",
    "outer", "pale", "patient", "plain", "pleasant", "plump", "polite", "poor", "popular", "precious",
    "pretty", "prime", "proud", "pure", "purple", "quick", "quiet", "rapid", "rare", "raw",
    "ready", "real", "red", "rich", "rigid", "ripe", "robust", "rough", "round", "royal",
    "rude", "rural", "rusty", "sacred", "sad", "safe", "salty", "sandy", "scarce", "secret",
    "serious", "shaggy", "shallow", "sharp", "shiny", "short", "shy", "silent", "silky", "silly",
    "silver", "simple", "sleepy", "slim", "slow", "small", "smart", "smooth", "snowy", "soft",
    "solid", "sour", "spare", "spicy", "square", "stale", "steady", "steep", "sticky", "stiff",
    "still", "stormy", "strange", "strict", "strong", "sturdy", "subtle", "sudden", "sunny", "super",
    "sweet", "swift", "tall", "tame", "tender", "tense", "thick", "thin", "thirsty", "tidy",
    "tiny", "tired", "tough", "tricky", "true", "ugly", "upper", "urban", "useful", "vague",
    "vast", "velvet", "violet", "vital", "vivid", "warm", "wary", "weak", "wealthy", "weary",
    "wet", "white", "whole", "wide", "wild", "windy", "wise", "witty", "wooden", "worried",
    "yellow", "young", "zealous",
};

constexpr std::string_view kNouns[] = {
    "acorn", "actor", "anchor", "angle", "animal", "ankle", "apple", "apron", "arch", "arrow",
    "atlas", "attic", "autumn", "badge", "bag", "bakery", "ball", "banana", "band", "banner",
    "barn", "barrel", "basket", "beach", "beacon", "bean", "bear", "beard", "bell", "bench",
    "berry", "bicycle", "bird", "blanket", "boat", "bone", "book", "boot", "bottle", "bowl",
    "box", "branch", "bread", "brick", "bridge", "brook", "broom", "brush", "bucket", "bull",
    "butter", "button", "cabin", "cable", "cactus", "cake", "camel", "camera", "canal", "candle",
    "canoe", "canvas", "carpet", "carrot", "castle", "cat", "cave", "cellar", "chain", "chair",
    "chalk", "cherry", "chest", "chimney", "circle", "city", "cliff", "clock", "cloud", "coat",
    "coin", "comet", "copper", "corner", "cottage", "cotton", "crab", "crane", "crown", "cup",
    "curtain", "cushion", "daisy", "desert", "desk", "diamond", "dolphin", "donkey", "door", "dragon",
    "drawer", "dress", "drum", "duck", "eagle", "engine", "falcon", "feather", "fence", "fern",
    "field", "finger", "flag", "flame", "flute", "forest", "fork", "fountain", "fox", "frog",
    "garden", "gate", "giraffe", "glacier", "glass", "glove", "goat", "grape", "grass", "guitar",
    "hammer", "harbor", "harp", "hat", "hawk", "hedge", "helmet", "hill", "honey", "horse",
    "island", "jacket", "jar", "jewel", "kettle", "key", "kitchen", "kite", "knife", "ladder",
    "lake", "lamp", "lantern", "leaf", "lemon", "letter", "lion", "lizard", "lobster", "lock",
    "magnet", "map", "maple", "marble", "meadow", "melon", "mirror", "monkey", "moon", "mountain",
    "mouse", "mushroom", "needle", "nest", "net", "nut", "oak", "ocean", "olive", "onion",
    "orchard", "otter", "owl", "paddle", "palace", "panda", "paper", "parrot", "peach", "pear",
    "pebble", "pencil", "pepper", "piano", "pillow", "pine", "planet", "plate", "plum", "pocket",
    "pond", "pony", "potato", "pumpkin", "puppet", "quill", "rabbit", "raft", "rain", "raven",
    "ribbon", "ring", "river", "road", "robin", "rock", "roof", "rope", "rose", "saddle",
    "sail", "salmon", "sand", "saucer", "scarf", "school", "shadow", "sheep", "shell", "ship",
    "shoe", "shovel", "silk", "sink", "skate", "sled", "snail", "snake", "sock", "sofa",
    "spider", "spoon", "spring", "squirrel", "stable", "star", "statue", "stone", "stove", "straw",
    "stream", "street", "sugar", "summer", "swan", "sword", "table", "tail", "teapot", "temple",
    "tent", "thimble", "thread", "throne", "tiger", "timber", "toast", "tomato", "tooth", "torch",
    "tower", "town", "toy", "tractor", "train", "tree", "trumpet", "tulip", "tunnel", "turtle",
    "umbrella", "valley", "vase", "violin", "wagon", "wall", "walnut", "wand", "whale", "wheat",
    "wheel", "whistle", "willow", "window", "wing", "winter", "wizard", "wolf", "wool", "yacht",
    "zebra",
};

std::uint64_t uniform(boost::random::mt19937_64& rng, std::uint64_t lo, std::uint64_t hi) {
  return boost::random::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
}

}  // namespace

std::span<const std::string_view> adjectives() noexcept { return kAdjectives; }
std::span<const std::string_view> nouns() noexcept { return kNouns; }

std::string random_word_key(boost::random::mt19937_64& rng) {
  const auto a = kAdjectives[uniform(rng, 0, std::size(kAdjectives) - 1)];
  const auto n = kNouns[uniform(rng, 0, std::size(kNouns) - 1)];
  std::string key(a);
  key += '-';
  key += n;
  return key;
}

std::string random_number(boost::random::mt19937_64& rng, int digits) {
  if (digits < 1 || digits > 18)
    throw invalid_argument("digits must be in [1, 18], got " + std::to_string(digits),
                           "random_number");
  std::uint64_t lo = 1;
  for (int i = 1; i < digits; ++i) lo *= 10;
  const std::uint64_t hi = lo * 10 - 1;
  return std::to_string(uniform(rng, digits == 1 ? 0 : lo, hi));
}

std::string random_uuid(boost::random::mt19937_64& rng) {
  const std::uint64_t max = ~std::uint64_t{0};
  std::uint64_t hi = uniform(rng, 0, max);
  std::uint64_t lo = uniform(rng, 0, max);
  hi = (hi & ~std::uint64_t{0xF000}) | std::uint64_t{0x4000};                  // version 4
  lo = (lo & ~(std::uint64_t{0xC} << 60)) | (std::uint64_t{0x8} << 60);         // variant 10xx
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx",
                static_cast<unsigned>(hi >> 32), static_cast<unsigned>((hi >> 16) & 0xFFFF),
                static_cast<unsigned>(hi & 0xFFFF), static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFULL));
  return buf;
}

std::string random_words(boost::random::mt19937_64& rng, int count) {
  const std::size_t na = std::size(kAdjectives), nn = std::size(kNouns);
  std::string out;
  for (int i = 0; i < count; ++i) {
    const std::size_t k = uniform(rng, 0, na + nn - 1);
    if (i) out += ' ';
    out += k < na ? kAdjectives[k] : kNouns[k - na];
  }
  return out;
}

}  // namespace bosch::tasks
