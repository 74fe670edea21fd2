#include "harness/tasks/needle/needle_task.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <stdexcept>

namespace harness::needle {

const char* const kQuestion = "\nThe special magic numbers, in order: ";

const std::vector<std::string>& needle_cities() {
  // World cities, one or two words, ASCII spellings (byte-level and subword vocabularies alike).
  static const std::vector<std::string> cities = {
      "Tokyo",     "Delhi",      "Shanghai",   "Sao Paulo",  "Mexico City", "Cairo",
      "Mumbai",    "Beijing",    "Dhaka",      "Osaka",      "New York",    "Karachi",
      "Istanbul",  "Chongqing",  "Kolkata",    "Manila",     "Lagos",       "Rio",
      "Tianjin",   "Kinshasa",   "Guangzhou",  "Los Angeles", "Moscow",     "Shenzhen",
      "Lahore",    "Bangalore",  "Paris",      "Bogota",     "Jakarta",     "Chennai",
      "Lima",      "Bangkok",    "Seoul",      "Nagoya",     "Hyderabad",   "London",
      "Tehran",    "Chicago",    "Chengdu",    "Nanjing",    "Wuhan",       "Luanda",
      "Ahmedabad", "Hong Kong",  "Dongguan",   "Hangzhou",   "Foshan",      "Santiago",
      "Riyadh",    "Madrid",     "Baghdad",    "Toronto",    "Pune",        "Khartoum",
      "Surat",     "Houston",    "Shenyang",   "Dallas",     "Mombasa", "Miami",
      "Abidjan",   "Barcelona",  "Yangon",     "Accra",      "Sydney",      "Melbourne",
      "Nairobi",   "Berlin",     "Rome",       "Athens",     "Lisbon",      "Vienna",
      "Warsaw",    "Prague",     "Budapest",   "Oslo",       "Stockholm",   "Helsinki",
      "Dublin",    "Amsterdam",  "Brussels",   "Zurich",     "Geneva",      "Munich",
      "Hamburg",   "Milan",      "Naples",     "Kyiv",       "Minsk",       "Bucharest",
      "Sofia",     "Belgrade",   "Zagreb",     "Havana",     "Caracas",     "Quito",
      "Montevideo", "Asuncion",  "La Paz",     "Panama",     "San Jose",    "Kingston",
      "Vancouver", "Montreal",   "Boston",     "Seattle",    "Denver",      "Atlanta",
      "Phoenix",   "Casablanca", "Tunis",      "Algiers",    "Addis Ababa", "Kampala",
      "Dakar",     "Harare",     "Lusaka",     "Cape Town",  "Durban",      "Kabul",
      "Tashkent",  "Almaty",     "Baku",       "Tbilisi",    "Yerevan",     "Amman",
      "Beirut",    "Damascus",   "Doha",       "Dubai",      "Muscat",      "Colombo",
      "Kathmandu", "Hanoi",      "Saigon",     "Phnom Penh", "Vientiane",   "Singapore",
      "Kuala Lumpur", "Perth",   "Auckland",   "Wellington", "Honolulu",    "Anchorage",
  };
  return cities;
}

std::string needle_sentence(const std::string& city, const std::string& number) {
  return "The special magic " + city + " number is " + number + ".";
}

std::string answer_text(const std::vector<std::string>& cities, const std::vector<std::string>& numbers) {
  std::string out;
  for (size_t k = 0; k < cities.size(); ++k) out += (k ? ";" : "") + cities[k] + "=" + numbers[k];
  return out;
}

std::vector<size_t> sentence_boundaries(const std::string& text) {
  std::vector<size_t> out = {0};
  for (size_t p = 2; p <= text.size(); ++p) {
    const char ws = text[p - 1], end = text[p - 2];
    if ((ws == ' ' || ws == '\n') && (end == '.' || end == '!' || end == '?')) out.push_back(p);
  }
  return out;
}

Generator::Generator(std::vector<std::string> documents, Encode encode)
    : documents_(std::move(documents)), encode_(std::move(encode)) {
  for (const auto& d : documents_) total_chars_ += d.size();
  if (total_chars_ == 0) throw std::invalid_argument("needle: the haystack documents are empty");
}

std::string Generator::haystack_text(size_t first, size_t chars) const {
  std::string out;
  for (size_t d = first; out.size() < chars; d = (d + 1) % documents_.size()) {
    if (!out.empty()) out += '\n';
    out += documents_[d];
  }
  out.resize(chars);
  return out;
}

int64_t Generator::min_total_tokens() const {
  // The longest three cities and the largest number, with no haystack at all.
  std::vector<std::string> by_length = needle_cities();
  std::sort(by_length.begin(), by_length.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  std::string needles;
  std::vector<std::string> cities, numbers;
  for (int k = 0; k < kNeedles; ++k) {
    needles += needle_sentence(by_length[k], "9999999") + " ";
    cities.push_back(by_length[k]);
    numbers.push_back("9999999");
  }
  return int64_t(encode_(needles + kQuestion).size() + encode_(answer_text(cities, numbers) + "\n").size());
}

Example Generator::make(int64_t total, uint64_t seed) const {
  if (total < min_total_tokens())
    throw std::invalid_argument("needle: an example of " + std::to_string(total) +
                                " tokens cannot hold three needles, the question and the answer "
                                "(at least " + std::to_string(min_total_tokens()) + " tokens)");
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 0x6E656564ull);
  // Three distinct cities, uniform numbers, uniform positions (as fractions of the boundaries).
  const auto& all = needle_cities();
  std::vector<size_t> pick(all.size());
  std::iota(pick.begin(), pick.end(), size_t(0));
  std::vector<std::string> cities, numbers;
  std::vector<double> where;
  std::uniform_int_distribution<int64_t> digits(1000000, 9999999);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int k = 0; k < kNeedles; ++k) {
    std::uniform_int_distribution<size_t> draw(size_t(k), pick.size() - 1);
    std::swap(pick[size_t(k)], pick[draw(rng)]);
    cities.push_back(all[pick[size_t(k)]]);
    numbers.push_back(std::to_string(digits(rng)));
    where.push_back(unit(rng));
  }
  const size_t first = std::uniform_int_distribution<size_t>(0, documents_.size() - 1)(rng);

  // The haystack's length in bytes: exact for bytes, shrunk until it fits for subword tokens.
  const auto build = [&](size_t chars) {
    Example e;
    e.haystack = haystack_text(first, chars);
    const auto bounds = sentence_boundaries(e.haystack);
    std::vector<size_t> order = {0, 1, 2}, at(kNeedles);
    for (int k = 0; k < kNeedles; ++k)
      at[size_t(k)] = bounds[std::min(bounds.size() - 1, size_t(where[size_t(k)] * double(bounds.size())))];
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return at[a] < at[b]; });
    std::vector<std::string> c_sorted, n_sorted;
    size_t from = 0;
    for (const size_t k : order) {
      e.prompt += e.haystack.substr(from, at[k] - from);
      from = at[k];
      e.needles.push_back({cities[k], numbers[k], e.prompt.size()});
      e.prompt += needle_sentence(cities[k], numbers[k]) + " ";
      c_sorted.push_back(cities[k]);
      n_sorted.push_back(numbers[k]);
    }
    e.prompt += e.haystack.substr(from) + kQuestion;
    e.answer = answer_text(c_sorted, n_sorted);
    const auto prompt = encode_(e.prompt), target = encode_(e.answer + "\n");
    e.prompt_tokens = int64_t(prompt.size());
    e.tokens = prompt;
    e.tokens.insert(e.tokens.end(), target.begin(), target.end());
    return e;
  };
  Example e = build(0);
  size_t chars = size_t(total - int64_t(e.tokens.size()));  // one byte per token to start
  for (;;) {
    e = build(chars);
    const int64_t excess = int64_t(e.tokens.size()) - total;
    if (excess <= 0 || chars == 0) break;
    chars -= std::min(chars, size_t(excess));
  }
  return e;
}

std::vector<float> target_mask(const Example& e) {
  std::vector<float> mask(e.tokens.size() - 1, 0.0f);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = int64_t(i) + 1 >= e.prompt_tokens ? 1.0f : 0.0f;
  return mask;
}

int Score::correct() const { return int(std::count(retrieved.begin(), retrieved.end(), true)); }

namespace {
std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(' ');
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(' ') - a + 1);
}
}  // namespace

Score score_answer(const std::string& output, const std::vector<Needle>& needles) {
  const std::string line = output.substr(0, output.find('\n'));
  std::vector<std::string> segments;
  for (size_t from = 0;;) {
    const size_t semi = line.find(';', from);
    segments.push_back(line.substr(from, semi == std::string::npos ? std::string::npos : semi - from));
    if (semi == std::string::npos) break;
    from = semi + 1;
  }
  Score s;
  for (size_t k = 0; k < needles.size(); ++k) {
    bool city = false, number = false;
    if (k < segments.size()) {
      const std::string seg = trim(segments[k]);
      const size_t eq = seg.find('=');
      if (eq != std::string::npos) {
        city = trim(seg.substr(0, eq)) == needles[k].city;
        number = trim(seg.substr(eq + 1)) == needles[k].number;
      }
    }
    s.city.push_back(city);
    s.number.push_back(number);
    s.retrieved.push_back(city && number);
  }
  return s;
}

}  // namespace harness::needle
