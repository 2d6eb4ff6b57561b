#!/usr/bin/env python3
"""Seeded, deterministic fixtures for three third-party MCP servers, and the check sets asked of two.

    python3 benches/walk/fixtures.py fs DIR [--seed N]        a workspace for @modelcontextprotocol/server-filesystem
    python3 benches/walk/fixtures.py git DIR [--seed N]       a repository for PyPI mcp-server-git
    python3 benches/walk/fixtures.py memory FILE [--seed N]   a JSONL graph for @modelcontextprotocol/server-memory
    python3 benches/walk/fixtures.py check-set fs|git FIXTURE_DIR OUT.jsonl

Same seed, same bytes: file contents come from fixed word lists through `random.Random(seed)`,
mtimes are fixed dates of 2024, and git commits get fixed names, emails, author and committer
dates, so their hashes are the same on every machine.

The check sets are questions written by hand, each with a function that computes its answer from
the fixture on disk (os.walk, os.stat, reading files; `git` for the repository), never from the
lists below. They were written against seed 0; every answer asserts it is unambiguous (no ties,
non-empty). A check set is never trained on.

Python 3.11, standard library only, plus the `git` program.
"""
import argparse
import csv
import datetime as dt
import io
import json
import os
import random
import subprocess
import sys

UTC = dt.UTC


def stamp(y, m, d, hh=12, mm=0):
    return int(dt.datetime(y, m, d, hh, mm, tzinfo=UTC).timestamp())


# ---------------------------------------------------------------------------------------------
# Word lists
# ---------------------------------------------------------------------------------------------

ADJ = ["quiet", "busy", "rainy", "slow", "bright", "long", "short", "good", "odd", "useful", "tricky", "calm",
       "messy", "careful", "quick", "cold", "warm", "fresh", "late", "early"]
NOUN = ["meeting", "walk", "deadline", "budget", "sensor", "garden", "train", "coffee", "report", "idea", "draft",
        "backup", "invoice", "weekend", "review", "plan", "library", "bike", "dinner", "call", "list", "market"]
VERB = ["finished", "started", "postponed", "reviewed", "fixed", "planned", "moved", "cleaned up", "rewrote",
        "checked", "booked", "ordered", "sketched", "tested", "discussed"]
PEOPLE = ["Maya", "Tom", "Lena", "Omar", "Priya", "Jonas", "Sara", "Leo", "Nina", "Felix"]
PLACES = ["the office", "home", "the library", "the cafe", "the station", "the park", "the workshop"]
TODO_ITEMS = ["Renew the bike insurance", "Call the dentist", "Back up the laptop", "Order printer ink",
              "Reply to Jonas about the trip", "Fix the garden tap", "Pay the electricity bill",
              "Return library books", "Update the budget spreadsheet", "Book train tickets to Porto",
              "Clean the fridge", "Buy a birthday present for Lena", "Sort the photo folders",
              "Cancel the unused streaming subscription"]
MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december"]


def sentence(r):
    forms = [
        lambda: f"I {r.choice(VERB)} the {r.choice(ADJ)} {r.choice(NOUN)} with {r.choice(PEOPLE)}.",
        lambda: f"The {r.choice(NOUN)} at {r.choice(PLACES)} was {r.choice(ADJ)} today.",
        lambda: f"{r.choice(PEOPLE)} {r.choice(VERB)} the {r.choice(NOUN)} before the {r.choice(NOUN)}.",
        lambda: f"Need to remember the {r.choice(ADJ)} {r.choice(NOUN)} next week.",
        lambda: f"We {r.choice(VERB)} the {r.choice(NOUN)} and it went {r.choice(['well', 'badly', 'fine', 'okay'])}.",
    ]
    return r.choice(forms)()


def paragraph(r, lo=2, hi=5):
    return " ".join(sentence(r) for _ in range(r.randint(lo, hi)))


def bullets(r, n):
    return "".join(f"- {sentence(r)}\n" for _ in range(n))


# ---------------------------------------------------------------------------------------------
# fs: a personal workspace
# ---------------------------------------------------------------------------------------------

def csv_text(header, rows):
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return out.getvalue()


def fs_files(r):
    """{relative path: text} for the workspace, in a fixed order."""
    f = {}
    f["README.md"] = ("# My workspace\n\nEverything I keep on this laptop, roughly sorted.\n\n"
                      "- `projects/`: side projects, one folder each\n- `notes/`: monthly notes and meetings\n"
                      "- `recipes/`: things I cook more than once\n- `travel/`: trip plans and budgets\n"
                      "- `finance/`: taxes and subscriptions\n")
    items = r.sample(TODO_ITEMS, 9)
    done = set(r.sample(range(9), 4))
    f["todo.md"] = "# To do\n\n" + "".join(f"- [{'x' if i in done else ' '}] {t}\n" for i, t in enumerate(items))
    f["settings.json"] = json.dumps({"theme": r.choice(["dark", "solarized", "light"]), "font_size": r.randint(11, 16),
                                     "autosave": True, "tab_width": 4,
                                     "recent_projects": ["weather-station", "budget-tracker"]}, indent=2) + "\n"

    # projects/weather-station
    p = "projects/weather-station/"
    f[p + "README.md"] = ("# Weather Station\n\nA Raspberry Pi on the balcony that logs temperature, humidity and "
                          "pressure every few minutes.\n\n## Hardware\n\n- Raspberry Pi Zero 2 W\n- BME280 sensor\n"
                          "- 5 V solar charger\n\n## Status\n\n" + paragraph(r) + "\n")
    f[p + "docs/setup.md"] = "# Setting up the Pi\n\n" + "\n\n".join(paragraph(r) for _ in range(r.randint(2, 4))) + "\n"
    f[p + "docs/wiring notes.md"] = ("# Wiring notes\n\n| Sensor pin | Pi pin |\n|---|---|\n| VIN | 1 (3V3) |\n"
                                     "| GND | 6 |\n| SCL | 5 (GPIO3) |\n| SDA | 3 (GPIO2) |\n\n" + paragraph(r) + "\n")
    f[p + "docs/changelog.md"] = "# Changelog\n\n" + "".join(
        f"## 0.{i}.0\n\n{bullets(r, r.randint(1, 3))}\n" for i in range(r.randint(3, 5), 0, -1))
    interval = r.choice([30, 60, 120, 300])
    f[p + "src/read_sensor.py"] = (
        '"""Read the BME280 and append one line to the month\'s CSV."""\nimport csv\nimport datetime\nimport time\n\n'
        "import bme280\nimport smbus2\n\n"
        f"PORT = 1\nADDRESS = 0x76\nINTERVAL = {interval}\n\n\n"
        "def read_once(bus):\n    sample = bme280.sample(bus, ADDRESS)\n"
        "    return round(sample.temperature, 2), round(sample.humidity, 1), round(sample.pressure, 1)\n\n\n"
        "def main():\n    bus = smbus2.SMBus(PORT)\n    while True:\n        now = datetime.datetime.now()\n"
        "        t, h, p = read_once(bus)\n        name = now.strftime('readings-%B.csv').lower()\n"
        "        with open(name, 'a', newline='') as f:\n"
        "            csv.writer(f).writerow([now.date(), now.strftime('%H:%M'), t, h, p])\n"
        "        time.sleep(INTERVAL)\n\n\nif __name__ == '__main__':\n    main()\n")
    f[p + "src/upload.py"] = (
        "import json\nimport urllib.request\n\nwith open('config.json') as f:\n    CONFIG = json.load(f)\n\n\n"
        "def upload(rows):\n    body = json.dumps({'station': CONFIG['station_id'], 'rows': rows}).encode()\n"
        "    req = urllib.request.Request(CONFIG['upload_url'], data=body, method='POST')\n"
        "    return urllib.request.urlopen(req, timeout=10).status\n")
    f[p + "src/config.json"] = json.dumps({"station_id": f"WS-{r.randint(1000, 9999)}", "interval_seconds": interval,
                                           "upload_url": "https://example.org/api/readings",
                                           "sensors": ["temperature", "humidity", "pressure"]}, indent=2) + "\n"

    def readings(month, n, lo, hi):
        rows = []
        for i in range(n):
            day = 1 + i * 28 // n
            rows.append([f"2024-{month:02d}-{day:02d}", f"{r.randint(0, 23):02d}:{r.choice(['00', '15', '30', '45'])}",
                         f"{r.uniform(lo, hi):.2f}", f"{r.uniform(35, 90):.1f}", f"{r.uniform(995, 1030):.1f}"])
        return csv_text(["date", "time", "temperature_c", "humidity_pct", "pressure_hpa"], rows)
    f[p + "data/readings-march.csv"] = readings(3, r.randint(40, 60), 1.0, 17.0)
    f[p + "data/readings-april.csv"] = readings(4, r.randint(110, 150), 4.0, 22.0)
    f[p + "data/stations.csv"] = csv_text(["station_id", "name", "latitude", "longitude"], [
        [f"WS-{r.randint(1000, 9999)}", n, f"{r.uniform(38, 55):.4f}", f"{r.uniform(-9, 15):.4f}"]
        for n in ["balcony", "allotment", "roof"]])

    # projects/budget-tracker
    p = "projects/budget-tracker/"
    f[p + "README.md"] = ("# Budget tracker\n\nTurns my bank exports into a monthly overview.\n\n## Usage\n\n"
                          "```\npython src/budget.py data/expenses-2024.csv\n```\n\n" + paragraph(r) + "\n")
    f[p + "config.json"] = json.dumps({"currency": r.choice(["EUR", "GBP", "CHF"]),
                                       "monthly_limit": r.randrange(1200, 2600, 50), "start_month": "2024-01",
                                       "categories_file": "src/categories.json"}, indent=2) + "\n"
    cats = ["groceries", "rent", "transport", "eating out", "utilities", "books", "health"]
    f[p + "docs/categories.md"] = "# Categories\n\n" + "".join(f"- **{c}**: {sentence(r)}\n" for c in cats)
    f[p + "src/categories.json"] = json.dumps({c: {"budget": r.randrange(20, 900, 10)} for c in cats}, indent=2) + "\n"
    f[p + "src/budget.py"] = (
        "import csv\nimport json\nimport sys\nfrom collections import defaultdict\n\n\n"
        "def totals(path):\n    out = defaultdict(float)\n    with open(path) as f:\n"
        "        for row in csv.DictReader(f):\n            out[row['category']] += float(row['amount'])\n"
        "    return dict(out)\n\n\nif __name__ == '__main__':\n"
        "    for cat, total in sorted(totals(sys.argv[1]).items()):\n        print(f'{cat:12} {total:8.2f}')\n")
    f[p + "src/report.py"] = (
        "from budget import totals\n\n\ndef month_report(path, limit):\n    t = totals(path)\n"
        "    spent = sum(t.values())\n    return {'spent': spent, 'left': limit - spent, 'by_category': t}\n")
    shops = {"groceries": ["Lidl", "Albert Heijn", "market stall"], "rent": ["rent"], "transport": ["train", "bus pass"],
             "eating out": ["pizza", "ramen", "lunch"], "utilities": ["electricity", "internet"],
             "books": ["bookshop"], "health": ["pharmacy", "gym"]}
    rows = []
    for i in range(r.randint(70, 100)):
        c = r.choice(cats)
        rows.append([f"2024-{1 + i * 12 // 100:02d}-{r.randint(1, 28):02d}", c, r.choice(shops[c]),
                     f"{r.uniform(3, 120) if c != 'rent' else 950:.2f}"])
    f[p + "data/expenses-2024.csv"] = csv_text(["date", "category", "description", "amount"], rows)
    f[p + "data/income-2024.csv"] = csv_text(["date", "source", "amount"], [
        [f"2024-{m:02d}-25", "salary", f"{r.uniform(2800, 3100):.2f}"] for m in range(1, 13)])

    # projects/garden-planner (its docs/ folder stays empty)
    p = "projects/garden-planner/"
    f[p + "README.md"] = "# Garden planner\n\nWhat to sow when, for the allotment.\n\n" + paragraph(r) + "\n"
    f[p + "src/planner.py"] = (
        "import csv\n\n\ndef ready_in(days_to_harvest, sown_week):\n    return sown_week + days_to_harvest // 7\n\n\n"
        "def plants(path='data/plants.csv'):\n    with open(path) as f:\n        return list(csv.DictReader(f))\n")
    plants = ["tomato", "courgette", "runner bean", "lettuce", "radish", "carrot", "beetroot", "kale", "leek",
              "pumpkin", "pea", "spinach", "onion"]
    days = r.sample(range(25, 160), len(plants))
    fams = {"tomato": "nightshade", "courgette": "squash", "pumpkin": "squash", "runner bean": "legume",
            "pea": "legume", "lettuce": "daisy", "radish": "brassica", "kale": "brassica", "carrot": "umbellifer",
            "beetroot": "amaranth", "spinach": "amaranth", "leek": "allium", "onion": "allium"}
    f[p + "data/plants.csv"] = csv_text(["name", "family", "days_to_harvest", "spacing_cm", "sun"], [
        [n, fams[n], d, r.choice([10, 15, 20, 30, 45, 60, 90]), r.choice(["full", "partial"])]
        for n, d in zip(plants, days)])
    f[p + "data/sowing-calendar.csv"] = csv_text(["plant", "sow_from", "sow_until"], [
        [n, MONTHS[m].title(), MONTHS[m + r.randint(1, 3)].title()] for n in plants for m in [r.randint(1, 6)]])

    # projects/recipe-scraper
    p = "projects/recipe-scraper/"
    f[p + "README.md"] = "# Recipe scraper\n\nSaves recipes from a few sites as Markdown.\n"
    f[p + "src/scrape.py"] = (
        "import json\nimport time\nimport urllib.request\n\nfrom parse import to_markdown\n\n"
        "SETTINGS = json.load(open('settings.json'))\n\n\ndef fetch(url):\n"
        "    req = urllib.request.Request(url, headers={'User-Agent': SETTINGS['user_agent']})\n"
        "    time.sleep(SETTINGS['delay_seconds'])\n    return urllib.request.urlopen(req).read().decode()\n")
    f[p + "src/parse.py"] = (
        "import re\n\n\ndef title(html):\n    m = re.search(r'<h1[^>]*>(.*?)</h1>', html, re.S)\n"
        "    return m.group(1).strip() if m else 'Untitled'\n\n\ndef to_markdown(html):\n"
        "    return f'# {title(html)}\\n'\n")
    f[p + "src/settings.json"] = json.dumps({"user_agent": "recipe-scraper/0.3", "delay_seconds": r.choice([1, 2, 3, 5]),
                                             "max_pages": r.randrange(20, 200, 10)}, indent=2) + "\n"
    f[p + "tests/test_parse.py"] = (
        "from parse import title\n\n\ndef test_title():\n    assert title('<h1>Soup</h1>') == 'Soup'\n\n\n"
        "def test_missing_title():\n    assert title('<p>none</p>') == 'Untitled'\n")

    # notes
    f["notes/ideas.md"] = "# Ideas\n\n" + bullets(r, r.randint(4, 9))
    books = ["The Overstory", "Piranesi", "Project Hail Mary", "Braiding Sweetgrass", "Klara and the Sun",
             "The Dispossessed", "Educated", "Sapiens", "The Remains of the Day", "Station Eleven"]
    f["notes/reading-list.md"] = "# Reading list\n\n" + "".join(
        f"- [{'x' if r.random() < 0.4 else ' '}] {b}\n" for b in r.sample(books, 7))
    f["notes/quick.txt"] = "wifi at the cafe: bluebird42\n"
    for i, m in enumerate(MONTHS[:6]):
        f[f"notes/2024/{m}.md"] = (f"# {m.title()} 2024\n\n" + "\n\n".join(paragraph(r) for _ in range(r.randint(1, 7)))
                                   + "\n\n## Done\n\n" + bullets(r, r.randint(2, 12)))
    text = "# Journal\n\n"
    day = dt.date(2024, 1, 2)
    while len(text) < 7600:
        text += f"## {day.isoformat()}\n\n{paragraph(r, 3, 6)}\n\n"
        day += dt.timedelta(days=r.randint(2, 6))
    f["notes/2024/journal.md"] = text
    meet = [("2024-02-05 kickoff.md", "Kickoff"), ("2024-03-11-standup.md", "Standup"),
            ("2024-04-22-retro.md", "Retro"), ("2024-06-03-planning.md", "Planning")]
    for name, title in meet:
        who = ", ".join(r.sample(PEOPLE, r.randint(2, 5)))
        f[f"notes/2024/meetings/{name}"] = (f"# {title} ({name[:10]})\n\nAttendees: {who}\n\n## Notes\n\n"
                                            + bullets(r, r.randint(2, 6)) + "\n## Actions\n\n" + bullets(r, r.randint(1, 4)))
    f["notes/2023/december.md"] = "# December 2023\n\n" + paragraph(r) + "\n"
    f["notes/2023/year-review.md"] = "# 2023 in review\n\n" + "\n\n".join(paragraph(r) for _ in range(4)) + "\n"

    # recipes
    recipes = {"banana-bread": ["ripe bananas", "flour", "butter", "brown sugar", "eggs", "baking soda", "walnuts"],
               "lentil-soup": ["red lentils", "onion", "carrot", "cumin", "vegetable stock", "lemon"],
               "pancakes": ["flour", "milk", "eggs", "butter"],
               "shakshuka": ["tomatoes", "eggs", "onion", "red pepper", "paprika", "cumin", "feta", "parsley"],
               "pesto": ["basil", "pine nuts", "parmesan", "garlic", "olive oil"],
               "chili": ["kidney beans", "minced beef", "onion", "garlic", "chili powder", "tomatoes", "cumin",
                         "dark chocolate", "lime"]}
    for name, ing in recipes.items():
        steps = "".join(f"{i}. {sentence(r)}\n" for i in range(1, r.randint(3, 9)))
        f[f"recipes/{name}.md"] = (f"# {name.replace('-', ' ').capitalize()}\n\nServes {r.randint(2, 6)}.\n\n"
                                   "## Ingredients\n\n" + "".join(f"- {r.choice([50, 100, 200, 250, 400])} g {i}\n"
                                                                   for i in ing) + "\n## Steps\n\n" + steps)
    f["recipes/shopping list.txt"] = "".join(f"{x}\n" for x in r.sample(
        ["milk", "eggs", "basil", "lemons", "oats", "coffee", "rice", "tomatoes", "bread", "apples"], 6))
    f["recipes/pantry.csv"] = csv_text(["item", "quantity", "unit", "best_before"], [
        [x, r.randint(1, 5), u, f"2025-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"]
        for x, u in [("rice", "kg"), ("pasta", "pack"), ("red lentils", "kg"), ("chickpeas", "tin"),
                     ("tomatoes", "tin"), ("olive oil", "bottle"), ("oats", "kg")]])

    # travel (travel/iceland stays empty)
    f["travel/packing-checklist.md"] = "# Packing checklist\n\n" + "".join(
        f"- [ ] {x}\n" for x in ["passport", "chargers", "adapter", "rain jacket", "walking shoes", "sunscreen",
                                  "medication", "headphones"])
    f["travel/lisbon/itinerary.md"] = "# Lisbon, May 2024\n\n" + "".join(
        f"## Day {d}\n\n{paragraph(r, 1, 3)}\n\n" for d in range(1, 6))
    f["travel/lisbon/budget.csv"] = csv_text(["item", "category", "amount_eur"], [
        ["flights", "transport", r.randint(150, 320)], ["hotel", "lodging", r.randint(380, 700)],
        ["tram passes", "transport", r.randint(20, 45)], ["food", "food", r.randint(180, 320)],
        ["Sintra day trip", "activities", r.randint(30, 80)], ["fado show", "activities", r.randint(25, 60)]])
    ci = dt.date(2024, 5, r.randint(6, 12))
    f["travel/lisbon/bookings.json"] = json.dumps({
        "flight": {"from": "AMS", "to": "LIS", "date": ci.isoformat(), "confirmation": f"K{r.randint(10000, 99999)}"},
        "hotel": {"name": r.choice(["Casa Alfama", "Hotel Baixa Verde", "Pensao Estrela"]), "check_in": ci.isoformat(),
                  "check_out": (ci + dt.timedelta(days=5)).isoformat()}}, indent=2) + "\n"
    f["travel/kyoto/itinerary.md"] = "# Kyoto, October 2024\n\n" + "".join(
        f"## Day {d}\n\n{paragraph(r, 1, 3)}\n\n" for d in range(1, 8))
    f["travel/kyoto/budget.csv"] = csv_text(["item", "category", "amount_eur"], [
        ["flights", "transport", r.randint(700, 1100)], ["ryokan", "lodging", r.randint(500, 900)],
        ["rail pass", "transport", r.randint(200, 300)], ["food", "food", r.randint(250, 450)],
        ["temples", "activities", r.randint(40, 90)]])
    f["travel/kyoto/phrases.md"] = ("# Phrases\n\n- arigatou gozaimasu: thank you very much\n- sumimasen: excuse me\n"
                                    "- eki wa doko desu ka: where is the station?\n")
    f["travel/kyoto/notes.txt"] = "Temples open at 8:30. Get the ICOCA card at the airport.\n"

    # finance
    f["finance/taxes-2023.md"] = "# Taxes 2023\n\n" + paragraph(r) + "\n\n- Filed: yes\n- Refund expected\n"
    subs = ["music streaming", "video streaming", "cloud storage", "newspaper", "gym", "password manager"]
    costs = r.sample(range(299, 4599, 50), len(subs))
    f["finance/subscriptions.csv"] = csv_text(["service", "monthly_cost", "renews"], [
        [s, f"{c / 100:.2f}", f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"] for s, c in zip(subs, costs)])
    f["finance/net-worth.csv"] = csv_text(["month", "savings", "investments"], [
        [f"2024-{m:02d}", r.randint(4000, 9000), r.randint(10000, 16000)] for m in range(1, 13)])
    return f


FS_EMPTY_DIRS = ["archive", "travel/iceland", "projects/garden-planner/docs", "projects/recipe-scraper/data"]


def build_fs(root, seed=0):
    r = random.Random(seed)
    if os.path.exists(root) and os.listdir(root):
        sys.exit(f"{root} exists and is not empty")
    files = fs_files(r)
    times = {}
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        base = os.path.basename(rel).lower()
        month = next((i + 1 for i, m in enumerate(MONTHS) if m in base or f"2024-{i + 1:02d}" in base), None)
        if "lisbon" in rel:
            month = 4
        if "kyoto" in rel:
            month = 9
        if month:
            t = stamp(2024, month, r.randint(1, 28), r.randint(10, 13), r.randint(0, 59))
        else:
            t = stamp(2024, 1, 1) + r.randrange(0, 365 * 86400 // 60) * 60
        times[rel] = t
    for d in FS_EMPTY_DIRS:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for rel, t in times.items():
        os.utime(os.path.join(root, rel), (t, t))
    # Directories deepest first: the time of their newest entry (a fixed date for an empty one).
    alld = set()
    for d in {os.path.dirname(p) for p in times} | set(FS_EMPTY_DIRS):
        while d:
            alld.add(d)
            d = os.path.dirname(d)
    dir_time = {}
    for d in sorted(alld, key=lambda d: (-d.count("/"), d)):
        kids = [t for p, t in times.items() if os.path.dirname(p) == d]
        kids += [dir_time[c] for c in dir_time if os.path.dirname(c) == d]
        t = max(kids) if kids else stamp(2024, 2, 14)
        dir_time[d] = t
        os.utime(os.path.join(root, d), (t, t))
    t = max(dir_time.values())
    os.utime(root, (t, t))


# ---------------------------------------------------------------------------------------------
# git: a small project with history
# ---------------------------------------------------------------------------------------------

AUTHORS = {"alice": ("Alice Moreau", "alice@moreau.example"), "bruno": ("Bruno Tanaka", "bruno.tanaka@example.com"),
           "chidi": ("Chidi Okafor", "chidi@okafor.example"), "dana": ("Dana Kowalski", "dana.k@example.net")}


def git_env(author=None, when=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
                "LC_ALL": "C", "TZ": "UTC"})
    if author:
        name, email = AUTHORS[author]
        env.update({"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name,
                    "GIT_COMMITTER_EMAIL": email, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when})
    return env


def git(repo, *args, author=None, when=None):
    return subprocess.run(["git", "-C", repo, "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false",
                           "-c", "init.defaultBranch=main", *args], env=git_env(author, when),
                          check=True, capture_output=True, text=True).stdout


def pyfile(doc, *funcs):
    return f'"""{doc}"""\n' + "".join(f"\n\n{fn.strip()}\n" for fn in funcs)


READER = '''def read_rows(path, delimiter=","):
    with open(path, newline="") as f:
        return list(csv.reader(f, delimiter=delimiter))'''
SNIFF = '''def sniff_delimiter(path):
    with open(path) as f:
        first = f.readline()
    return ";" if first.count(";") > first.count(",") else ","'''
PAGER = '''def pages(rows, height):
    return [rows[i:i + height] for i in range(0, len(rows), height)]'''
PAGECOUNT_BAD = '''def page_count(rows, height):
    return len(rows) // height + 1'''
PAGECOUNT = '''def page_count(rows, height):
    return (len(rows) + height - 1) // height'''
NARROW = '''def usable_width(columns):
    return max(columns, 20)'''
CSV_EXPORT = '''def to_csv(rows, path):
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)'''
JSON_EXPORT = '''def to_json(rows, path):
    header, *body = rows
    with open(path, "w") as f:
        json.dump([dict(zip(header, r)) for r in body], f, indent=2)'''
WIDTHS = '''def column_widths(rows):
    return [max(len(str(c)) for c in col) for col in zip(*rows)]'''
SEARCH = '''def find(rows, needle):
    return [i for i, row in enumerate(rows) if any(needle in cell for cell in row)]'''
HIGHLIGHT = '''def highlight(cell, needle):
    return cell.replace(needle, f"\\x1b[7m{needle}\\x1b[0m")'''
CASEFOLD = '''def find(rows, needle, ignore_case=False):
    norm = str.casefold if ignore_case else str
    return [i for i, row in enumerate(rows) if any(norm(needle) in norm(cell) for cell in row)]'''


def prose(r, title, n):
    return f"# {title}\n\n" + "\n\n".join(paragraph(r, 2, 4) for _ in range(n)) + "\n"


def git_history(r):
    """Steps: ("commit", author, when, message, {path: text or None}, {old: new renames}), ("branch", name),
    ("checkout", name), ("merge", name, author, when, message), ("tag", name, author, when, message)."""
    readme1 = "# csvpeek\n\nA small terminal viewer for CSV files.\n"
    readme2 = readme1 + "\n## Usage\n\n```\ncsvpeek data.csv\ncsvpeek --export out.json data.csv\n```\n"
    readme3 = readme2 + "\n## Search\n\nPress `/` and type to jump to the next matching row.\n"
    cli1 = pyfile("Command-line entry point.", "import argparse\n\nfrom reader import read_rows\nfrom pager import pages",
                  'def main(argv=None):\n    p = argparse.ArgumentParser(prog="csvpeek")\n    p.add_argument("file")\n'
                  '    args = p.parse_args(argv)\n    for page in pages(read_rows(args.file), 20):\n        print(page)')
    cli2 = cli1.replace('p.add_argument("file")', 'p.add_argument("file")\n    p.add_argument("--export")') + (
        '\n\ndef export(rows, target):\n    from export import to_csv\n    to_csv(rows, target)\n')
    cli3 = cli2.replace("from reader import", "from loader import")
    lic = "MIT License\n\nCopyright (c) 2024 the csvpeek authors\n\nPermission is hereby granted, free of charge, to any person obtaining a copy of this software.\n"
    t_reader = pyfile("Tests of the CSV reader.", "from reader import read_rows",
                      'def test_reads_rows(tmp_path):\n    p = tmp_path / "a.csv"\n    p.write_text("a,b\\n1,2\\n")\n'
                      '    assert read_rows(p) == [["a", "b"], ["1", "2"]]')
    t_reader2 = t_reader + ('\n\ndef test_semicolons(tmp_path):\n    p = tmp_path / "a.csv"\n    p.write_text("a;b\\n")\n'
                            '    assert read_rows(p, ";") == [["a", "b"]]\n')
    t_loader = t_reader2.replace("from reader import", "from loader import").replace("CSV reader", "CSV loader")
    t_loader2 = t_loader + ('\n\ndef test_empty_file(tmp_path):\n    p = tmp_path / "e.csv"\n    p.write_text("")\n'
                            '    assert read_rows(p) == []\n')
    t_pager = pyfile("Tests of the pager.", "from pager import page_count, pages",
                     "def test_pages():\n    assert len(pages(list(range(45)), 20)) == 3",
                     "def test_page_count_exact():\n    assert page_count(list(range(40)), 20) == 2",
                     "def test_page_count_empty():\n    assert page_count([], 20) == 0")
    s = []

    def c(author, when, msg, files=None, renames=None):
        s.append(("commit", author, when, msg, files or {}, renames or {}))
    c("alice", "2024-01-08T09:14:00+0000", "Initial commit: README and license", {"README.md": readme1, "LICENSE": lic})
    c("alice", "2024-01-09T10:02:00+0000", "Add CSV reader", {"src/reader.py": pyfile("Read CSV files.", "import csv", READER)})
    c("bruno", "2024-01-11T14:40:00+0000", "Add command-line entry point", {"src/cli.py": cli1})
    c("alice", "2024-01-12T16:20:00+0000", "Add pager for long tables",
      {"src/pager.py": pyfile("Split rows into screen-sized pages.", PAGER, PAGECOUNT_BAD)})
    c("chidi", "2024-01-15T11:05:00+0000", "Add tests for the CSV reader", {"tests/test_reader.py": t_reader})
    c("bruno", "2024-01-16T08:50:00+0000", "Add packaging metadata",
      {"setup.cfg": "[metadata]\nname = csvpeek\nversion = 0.1.0\n\n[options]\npackage_dir =\n    = src\n",
       ".gitignore": "__pycache__/\n*.egg-info/\n.venv/\n"})
    c("dana", "2024-01-18T13:30:00+0000", "Write installation notes",
      {"docs/install.md": prose(r, "Installing csvpeek", 2), "docs/notes.md": prose(r, "Scratch notes", 1)})
    c("alice", "2024-01-22T09:45:00+0000", "Support semicolon-delimited files",
      {"src/reader.py": pyfile("Read CSV files.", "import csv", READER, SNIFF), "tests/test_reader.py": t_reader2})
    c("chidi", "2024-01-24T15:12:00+0000", "Fix off-by-one in pager",
      {"src/pager.py": pyfile("Split rows into screen-sized pages.", PAGER, PAGECOUNT)})
    c("bruno", "2024-02-01T10:33:00+0000", "Add CSV export",
      {"src/export.py": pyfile("Write tables back out.", "import csv", CSV_EXPORT), "src/cli.py": cli2})
    c("dana", "2024-02-02T17:05:00+0000", "Document the command-line options", {"docs/usage.md": prose(r, "Usage", 3)})
    c("alice", "2024-02-05T09:00:00+0000", "Start the changelog",
      {"CHANGELOG.md": "# Changelog\n\n## 0.1.0\n\n- CSV reader with semicolon support\n- Pager\n- CSV export\n"})
    c("chidi", "2024-02-06T12:20:00+0000", "Add tests for the pager", {"tests/test_pager.py": t_pager})
    s.append(("tag", "v0.1.0", "alice", "2024-02-06T18:00:00+0000", "csvpeek 0.1.0"))
    c("bruno", "2024-02-12T10:10:00+0000", "Rename reader module to loader", {"src/cli.py": cli3, "tests/test_loader.py": t_loader},
      {"src/reader.py": "src/loader.py", "tests/test_reader.py": "tests/test_loader.py"})
    c("alice", "2024-02-14T14:00:00+0000", "Add JSON export",
      {"src/export.py": pyfile("Write tables back out.", "import csv\nimport json", CSV_EXPORT, JSON_EXPORT), "README.md": readme2})
    c("dana", "2024-02-19T09:25:00+0000", "Remove outdated scratch notes", {"docs/notes.md": None})
    c("chidi", "2024-02-21T16:45:00+0000", "Handle empty input files",
      {"src/loader.py": pyfile("Read CSV files.", "import csv", READER.replace("        return", "        rows =") +
                               "\n    return rows or []", SNIFF), "tests/test_loader.py": t_loader2})
    c("alice", "2024-02-26T11:30:00+0000", "Add column width detection",
      {"src/layout.py": pyfile("Lay out columns on screen.", WIDTHS)})
    s.append(("branch", "feature/search"))
    s.append(("branch", "docs/install"))
    s.append(("checkout", "feature/search"))
    c("alice", "2024-03-01T10:00:00+0000", "Add search module", {"src/search.py": pyfile("Find rows.", SEARCH)})
    c("chidi", "2024-03-04T13:40:00+0000", "Add tests for search",
      {"tests/test_search.py": pyfile("Tests of search.", "from search import find",
                                      'def test_find():\n    assert find([["a"], ["b"]], "b") == [1]')})
    c("alice", "2024-03-06T09:20:00+0000", "Highlight matches in search results",
      {"src/search.py": pyfile("Find rows.", SEARCH, HIGHLIGHT)})
    c("alice", "2024-03-08T15:55:00+0000", "Make search case-insensitive on request",
      {"src/search.py": pyfile("Find rows.", CASEFOLD, HIGHLIGHT), "README.md": readme3})
    s.append(("checkout", "docs/install"))
    c("dana", "2024-03-05T10:15:00+0000", "Add Windows install steps",
      {"docs/install.md": prose(r, "Installing csvpeek", 2) + "\n## Windows\n\nUse `py -m pip install csvpeek`.\n"})
    c("dana", "2024-03-07T11:45:00+0000", "Fix typos in install guide",
      {"docs/install.md": prose(r, "Installing csvpeek", 2) + "\n## Windows\n\nUse `py -m pip install csvpeek` in PowerShell.\n"})
    s.append(("checkout", "main"))
    c("bruno", "2024-03-11T09:10:00+0000", "Show a status line with the page number",
      {"src/pager.py": pyfile("Split rows into screen-sized pages.", PAGER, PAGECOUNT,
                              'def status(page, total):\n    return f"page {page + 1} of {total}"')})
    s.append(("merge", "feature/search", "alice", "2024-03-12T10:30:00+0000", "Merge branch 'feature/search'"))
    c("chidi", "2024-03-14T14:25:00+0000", "Wire search into the command line",
      {"src/cli.py": cli3.replace("from pager import pages", "from pager import pages\nfrom search import find")})
    c("bruno", "2024-03-18T10:05:00+0000", "Add design notes", {"docs/design.md": prose(r, "Design", 3)})
    s.append(("branch", "fix/pager"))
    c("alice", "2024-03-20T09:40:00+0000", "Use column widths when printing pages",
      {"src/layout.py": pyfile("Lay out columns on screen.", WIDTHS,
                               'def format_row(row, widths):\n    return "  ".join(c.ljust(w) for c, w in zip(row, widths))')})
    c("dana", "2024-03-25T16:00:00+0000", "Move usage docs into the README",
      {"docs/usage.md": None, "README.md": readme3 + "\n## Options\n\n- `--export FILE`: write the table to FILE\n"})
    c("bruno", "2024-04-02T11:15:00+0000", "Add tests helpers in conftest",
      {"tests/conftest.py": pyfile("Shared fixtures.", "import pytest",
                                   '@pytest.fixture\ndef small_csv(tmp_path):\n    p = tmp_path / "s.csv"\n'
                                   '    p.write_text("a,b\\n1,2\\n3,4\\n")\n    return p')})
    c("alice", "2024-04-04T10:50:00+0000", "Rename layout module to columns", {}, {"src/layout.py": "src/columns.py"})
    c("chidi", "2024-04-08T13:35:00+0000", "Fix crash when a row has extra cells",
      {"src/columns.py": pyfile("Lay out columns on screen.", WIDTHS.replace("zip(*rows)", "itertools.zip_longest(*rows, fillvalue=\"\")"),
                                'def format_row(row, widths):\n    return "  ".join(c.ljust(w) for c, w in zip(row, widths))')
       .replace('"""\n', '"""\nimport itertools\n', 1)})
    c("alice", "2024-04-10T09:05:00+0000", "Update the changelog for 0.2.0",
      {"CHANGELOG.md": "# Changelog\n\n## 0.2.0\n\n- JSON export\n- Search with highlighting\n- Column widths\n"
                       "\n## 0.1.0\n\n- CSV reader with semicolon support\n- Pager\n- CSV export\n",
       "setup.cfg": "[metadata]\nname = csvpeek\nversion = 0.2.0\n\n[options]\npackage_dir =\n    = src\n"})
    s.append(("tag", "v0.2.0", "alice", "2024-04-10T12:00:00+0000", "csvpeek 0.2.0"))
    c("bruno", "2024-04-15T15:30:00+0000", "Bump version to 0.3.0.dev0",
      {"setup.cfg": "[metadata]\nname = csvpeek\nversion = 0.3.0.dev0\n\n[options]\npackage_dir =\n    = src\n"})
    c("alice", "2024-04-17T10:20:00+0000", "Read gzip-compressed CSV files",
      {"src/loader.py": pyfile("Read CSV files.", "import csv\nimport gzip",
                               READER.replace("open(path", '(gzip.open(path, "rt") if str(path).endswith(".gz") else open)(path')
                               .replace("        return", "        rows =") + "\n    return rows or []", SNIFF)})
    s.append(("checkout", "fix/pager"))
    c("chidi", "2024-03-22T10:00:00+0000", "Fix pager when the terminal is narrow",
      {"src/pager.py": pyfile("Split rows into screen-sized pages.", PAGER, PAGECOUNT,
                              'def status(page, total):\n    return f"page {page + 1} of {total}"', NARROW)})
    c("chidi", "2024-03-26T14:10:00+0000", "Add regression test for narrow terminals",
      {"tests/test_pager.py": t_pager + "\n\ndef test_narrow():\n    from pager import usable_width\n"
                                        "    assert usable_width(5) == 20\n"})
    c("bruno", "2024-03-28T09:30:00+0000", "Keep the status line on narrow terminals",
      {"src/pager.py": pyfile("Split rows into screen-sized pages.", PAGER, PAGECOUNT,
                              'def status(page, total):\n    return f"{page + 1}/{total}"', NARROW)})
    s.append(("checkout", "main"))
    return s


def build_git(root, seed=0):
    r = random.Random(seed)
    if os.path.exists(root) and os.listdir(root):
        sys.exit(f"{root} exists and is not empty")
    os.makedirs(root, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    for step in git_history(r):
        kind = step[0]
        if kind == "commit":
            _, author, when, msg, files, renames = step
            for old, new in renames.items():
                os.makedirs(os.path.dirname(os.path.join(root, new)), exist_ok=True)
                git(root, "mv", old, new)
            for rel, text in files.items():
                path = os.path.join(root, rel)
                if text is None:
                    git(root, "rm", "-q", rel)
                    continue
                os.makedirs(os.path.dirname(path) or root, exist_ok=True)
                with open(path, "w", encoding="utf-8", newline="\n") as fh:
                    fh.write(text)
                git(root, "add", rel)
            git(root, "commit", "-q", "-m", msg, author=author, when=when)
        elif kind == "branch":
            git(root, "branch", step[1])
        elif kind == "checkout":
            git(root, "checkout", "-q", step[1])
        elif kind == "merge":
            _, name, author, when, msg = step
            git(root, "merge", "-q", "--no-ff", "-m", msg, name, author=author, when=when)
        elif kind == "tag":
            _, name, author, when, msg = step
            git(root, "tag", "-a", name, "-m", msg, author=author, when=when)


# ---------------------------------------------------------------------------------------------
# memory: a knowledge graph
# ---------------------------------------------------------------------------------------------

MEM_ENTITIES = [
    ("Ana Souza", "person", ["Data engineer", "Speaks Portuguese and English", "Runs a weekly book club", "Joined Northwind Labs in 2021"]),
    ("Ben Carter", "person", ["Engineering manager", "Former rower", "Prefers written proposals"]),
    ("Chen Wei", "person", ["Frontend developer", "Maintains the design system", "Plays the violin"]),
    ("Dara Nolan", "person", ["Product manager", "Moved from Dublin in 2022", "Allergic to peanuts"]),
    ("Elif Kaya", "person", ["Security engineer", "Gives talks on threat modelling", "Cycles to work"]),
    ("Farah Haddad", "person", ["Founder of Brightleaf", "Studied chemistry", "Mentors first-time founders", "Lives near the harbour"]),
    ("Gustav Lind", "person", ["Backend developer", "Open-source maintainer", "Bakes sourdough"]),
    ("Hana Sato", "person", ["Data scientist", "Works on demand forecasting", "Learning Spanish"]),
    ("Ivan Petrov", "person", ["Site reliability engineer", "On call every third week"]),
    ("Julia Brandt", "person", ["CTO of Northwind Labs", "Previously at Atlas Freight", "Runs marathons"]),
    ("Kofi Mensah", "person", ["Mobile developer", "Organises the city's Kotlin meetup", "Has two cats"]),
    ("Lucia Romano", "person", ["Designer", "Freelances for Brightleaf", "Collects vinyl records"]),
    ("Northwind Labs", "company", ["Makes logistics software", "About 120 employees", "Founded in 2015"]),
    ("Brightleaf", "company", ["Sells plant-based packaging", "Seed-stage startup", "Founded in 2023"]),
    ("Atlas Freight", "company", ["Shipping company", "Customer of Northwind Labs", "Headquartered in Rotterdam"]),
    ("Orbit Analytics", "company", ["Analytics consultancy", "Partner of Northwind Labs"]),
    ("Route Planner", "project", ["Plans delivery routes", "Written in Go", "Launched in 2020"]),
    ("Design System", "project", ["Shared UI components", "Used by three products"]),
    ("Forecast Engine", "project", ["Predicts shipping demand", "Python and SQL", "Started in 2024"]),
    ("Leaf Shop", "project", ["Brightleaf's online shop", "Built on a hosted platform"]),
    ("OpenQueue", "project", ["Open-source job queue", "Over 2,000 stars on GitHub", "MIT licensed"]),
    ("Lisbon", "city", ["Capital of Portugal", "Northwind Labs has an office here"]),
    ("Rotterdam", "city", ["Largest port in Europe", "Home of Atlas Freight"]),
    ("Berlin", "city", ["Capital of Germany", "Northwind Labs headquarters", "Hosts the Kotlin meetup"]),
    ("Dublin", "city", ["Capital of Ireland", "Dara Nolan's home town"]),
]
MEM_RELATIONS = [
    ("Ana Souza", "Northwind Labs", "works_at"), ("Ben Carter", "Northwind Labs", "works_at"),
    ("Chen Wei", "Northwind Labs", "works_at"), ("Dara Nolan", "Northwind Labs", "works_at"),
    ("Elif Kaya", "Northwind Labs", "works_at"), ("Gustav Lind", "Orbit Analytics", "works_at"),
    ("Hana Sato", "Northwind Labs", "works_at"), ("Ivan Petrov", "Atlas Freight", "works_at"),
    ("Julia Brandt", "Northwind Labs", "works_at"), ("Kofi Mensah", "Brightleaf", "works_at"),
    ("Farah Haddad", "Brightleaf", "founded"), ("Lucia Romano", "Brightleaf", "freelances_for"),
    ("Julia Brandt", "Ben Carter", "manages"), ("Ben Carter", "Ana Souza", "manages"),
    ("Ben Carter", "Chen Wei", "manages"), ("Ben Carter", "Hana Sato", "manages"),
    ("Ana Souza", "Lisbon", "lives_in"), ("Dara Nolan", "Berlin", "lives_in"), ("Kofi Mensah", "Berlin", "lives_in"),
    ("Ivan Petrov", "Rotterdam", "lives_in"), ("Farah Haddad", "Lisbon", "lives_in"),
    ("Chen Wei", "Design System", "contributes_to"), ("Lucia Romano", "Design System", "contributes_to"),
    ("Hana Sato", "Forecast Engine", "contributes_to"), ("Ana Souza", "Forecast Engine", "contributes_to"),
    ("Gustav Lind", "OpenQueue", "contributes_to"), ("Elif Kaya", "Route Planner", "contributes_to"),
    ("Northwind Labs", "Route Planner", "owns"), ("Brightleaf", "Leaf Shop", "owns"),
    ("Atlas Freight", "Northwind Labs", "customer_of"), ("Orbit Analytics", "Northwind Labs", "partner_of"),
    ("Atlas Freight", "Rotterdam", "headquartered_in"),
]


def build_memory(path, seed=0):
    r = random.Random(seed)
    lines = []
    for name, kind, obs in MEM_ENTITIES:
        obs = list(obs)
        r.shuffle(obs)
        lines.append({"type": "entity", "name": name, "entityType": kind, "observations": obs})
    for a, b, rel in MEM_RELATIONS:
        lines.append({"type": "relation", "from": a, "to": b, "relationType": rel})
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))


# ---------------------------------------------------------------------------------------------
# Check sets: questions written by hand, answers computed from the fixture on disk
# ---------------------------------------------------------------------------------------------

KINDS = ["lookup", "chained", "count", "minmax", "existence", "filter", "content"]
FS_QUESTIONS = []
GIT_QUESTIONS = []


def question(bank, kind, task):
    assert kind in KINDS, kind

    def register(fn):
        bank.append((kind, task, fn))
        return fn
    return register


def fsq(kind, task):
    return question(FS_QUESTIONS, kind, task)


def gitq(kind, task):
    return question(GIT_QUESTIONS, kind, task)


def yes_no(flag):
    return {"exact": "yes" if flag else "no"}


def contains(text):
    text = str(text)
    assert text.strip(), "empty answer"
    return {"contains": text}


def set_of(items):
    items = sorted(str(x) for x in items)
    assert items and all(x.strip() for x in items), "empty set"
    assert len(set(items)) == len(items), f"duplicates in {items}"
    return {"set": items}


def unique_max(pairs):
    """The key of the largest value, asserting that no other key ties it. pairs: {key: value}."""
    assert pairs, "nothing to compare"
    best = max(pairs.values())
    keys = [k for k, v in pairs.items() if v == best]
    assert len(keys) == 1, f"tie for the maximum: {keys}"
    return keys[0]


def unique_min(pairs):
    return unique_max({k: -v for k, v in pairs.items()})


def unique_basename(root, rel):
    """The file's bare name when no other file in the workspace has it, else its relative path."""
    name = os.path.basename(rel)
    return name if sum(name in fs for _, _, fs in os.walk(root)) == 1 else rel


# -- fs helpers: everything relative to the workspace root, read from disk ---------------------

def all_files(root, under=""):
    """Relative paths (with '/') of every file below `under`."""
    out = []
    for d, dirs, fs in os.walk(os.path.join(root, under)):
        dirs.sort()
        for name in sorted(fs):
            out.append(os.path.relpath(os.path.join(d, name), root).replace(os.sep, "/"))
    return out


def files_in(root, folder):
    """Files directly in `folder` (no subfolders)."""
    base = os.path.join(root, folder)
    return [f"{folder}/{n}" for n in sorted(os.listdir(base)) if os.path.isfile(os.path.join(base, n))]


def size(root, rel):
    return os.stat(os.path.join(root, rel)).st_size


def mtime(root, rel):
    return os.stat(os.path.join(root, rel)).st_mtime


def read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as fh:
        return fh.read()


def csv_rows(root, rel):
    with open(os.path.join(root, rel), newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def first_heading(text):
    for line in text.splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
    raise AssertionError("no heading")


def day(ts):
    return dt.datetime.fromtimestamp(ts, UTC).date().isoformat()


# -- fs questions ----------------------------------------------------------------------------------

@fsq("lookup", "How big is my pancakes recipe file, in bytes?")
def _(root):
    [rel] = [p for p in all_files(root) if p.endswith("/pancakes.md")]
    return size(root, rel)


@fsq("lookup", "What's the title at the top of the garden planner project's README?")
def _(root):
    return contains(first_heading(read(root, "projects/garden-planner/README.md")))


@fsq("lookup", "When did I last change the itinerary for the Lisbon trip? Give the date as YYYY-MM-DD.")
def _(root):
    return contains(day(mtime(root, "travel/lisbon/itinerary.md")))


@fsq("lookup", "How many bytes is the settings.json file at the top of my workspace?")
def _(root):
    return size(root, "settings.json")


@fsq("lookup", "Who came to the kickoff meeting in February? List the attendees from my meeting notes.")
def _(root):
    [rel] = [p for p in all_files(root, "notes") if "kickoff" in p]
    line = next(ln for ln in read(root, rel).splitlines() if ln.startswith("Attendees:"))
    return set_of(x.strip() for x in line.split(":", 1)[1].split(","))


@fsq("count", "How many files are directly inside notes/2024 in my workspace, not counting the ones in its subfolders?")
def _(root):
    return len(files_in(root, "notes/2024"))


@fsq("count", "How many Markdown files do I have in my workspace altogether?")
def _(root):
    return sum(p.endswith(".md") for p in all_files(root))


@fsq("count", "How many Python scripts are there across all my projects?")
def _(root):
    return sum(p.endswith(".py") for p in all_files(root, "projects"))


@fsq("count", "How many meeting notes did I write in 2024?")
def _(root):
    return len(all_files(root, "notes/2024/meetings"))


@fsq("count", "How many folders in my workspace are completely empty?")
def _(root):
    return sum(1 for d, dirs, fs in os.walk(root) if not dirs and not fs)


@fsq("count", "How many projects do I have in the projects folder?")
def _(root):
    return sum(os.path.isdir(os.path.join(root, "projects", n)) for n in os.listdir(os.path.join(root, "projects")))


@fsq("count", "How many JSON files are there in my workspace?")
def _(root):
    return sum(p.endswith(".json") for p in all_files(root))


@fsq("minmax", "What's the biggest file in my whole workspace?")
def _(root):
    return contains(unique_basename(root, unique_max({p: size(root, p) for p in all_files(root)})))


@fsq("minmax", "Which file in my recipes folder is the smallest?")
def _(root):
    return contains(unique_basename(root, unique_min({p: size(root, p) for p in files_in(root, "recipes")})))


@fsq("minmax", "Which CSV in the weather station project's data folder is the largest?")
def _(root):
    d = "projects/weather-station/data"
    return contains(unique_basename(root, unique_max({p: size(root, p) for p in files_in(root, d) if p.endswith(".csv")})))


@fsq("minmax", "Which of my projects has the most files in it, counting its subfolders?")
def _(root):
    names = [n for n in os.listdir(os.path.join(root, "projects")) if os.path.isdir(os.path.join(root, "projects", n))]
    return contains(unique_max({n: len(all_files(root, f"projects/{n}")) for n in names}))


@fsq("minmax", "Of my monthly notes for 2024 (January to June), which month's note is the longest?")
def _(root):
    months = {m: size(root, f"notes/2024/{m}.md") for m in MONTHS if os.path.exists(os.path.join(root, f"notes/2024/{m}.md"))}
    return contains(unique_max(months).title())


@fsq("minmax", "Which file in my travel folder was modified most recently?")
def _(root):
    return contains(unique_max({p: mtime(root, p) for p in all_files(root, "travel")}).removeprefix("travel/"))


@fsq("minmax", "What's the most expensive subscription I'm paying for each month?")
def _(root):
    return contains(unique_max({r["service"]: float(r["monthly_cost"]) for r in csv_rows(root, "finance/subscriptions.csv")}))


@fsq("existence", "Is there a shakshuka recipe somewhere in my workspace?")
def _(root):
    return yes_no(any("shakshuka" in os.path.basename(p) for p in all_files(root)))


@fsq("existence", "Do I have a file called passport.md anywhere in my workspace?")
def _(root):
    return yes_no(any(os.path.basename(p) == "passport.md" for p in all_files(root)))


@fsq("existence", "Does the budget-tracker project have a tests folder?")
def _(root):
    return yes_no(os.path.isdir(os.path.join(root, "projects/budget-tracker/tests")))


@fsq("existence", "Is there a tests folder in the recipe-scraper project?")
def _(root):
    return yes_no(os.path.isdir(os.path.join(root, "projects/recipe-scraper/tests")))


@fsq("existence", "Did I put anything in the Iceland travel folder yet?")
def _(root):
    return yes_no(bool(os.listdir(os.path.join(root, "travel/iceland"))))


@fsq("filter", "List the files in my recipes folder that are bigger than 300 bytes.")
def _(root):
    big = [p for p in files_in(root, "recipes") if size(root, p) > 300]
    assert all(abs(size(root, p) - 300) > 5 for p in files_in(root, "recipes")), "a size too close to the threshold"
    return set_of(os.path.basename(p) for p in big)


@fsq("filter", "Which files in the weather station's src folder are larger than 500 bytes?")
def _(root):
    d = "projects/weather-station/src"
    assert all(abs(size(root, p) - 500) > 5 for p in files_in(root, d))
    return set_of(os.path.basename(p) for p in files_in(root, d) if size(root, p) > 500)


@fsq("filter", "List all the CSV files in my travel folder.")
def _(root):
    return set_of(p.removeprefix("travel/") for p in all_files(root, "travel") if p.endswith(".csv"))


@fsq("filter", "Which files in my workspace have a space in their name?")
def _(root):
    return set_of(os.path.basename(p) for p in all_files(root) if " " in os.path.basename(p))


@fsq("content", "How many readings are in the weather station's April CSV, not counting the header line?")
def _(root):
    return len(csv_rows(root, "projects/weather-station/data/readings-april.csv"))


@fsq("content", "What currency is my budget tracker set up to use?")
def _(root):
    return contains(json.loads(read(root, "projects/budget-tracker/config.json"))["currency"])


@fsq("content", "How much did the Lisbon trip cost in total, in euros, according to its budget file?")
def _(root):
    return sum(int(r["amount_eur"]) for r in csv_rows(root, "travel/lisbon/budget.csv"))


@fsq("content", "How many things on my to-do list haven't I ticked off yet?")
def _(root):
    return sum(ln.startswith("- [ ]") for ln in read(root, "todo.md").splitlines())


@fsq("content", "What was the warmest temperature the weather station logged in March?")
def _(root):
    temps = [float(r["temperature_c"]) for r in csv_rows(root, "projects/weather-station/data/readings-march.csv")]
    assert temps.count(max(temps)) == 1
    return max(temps)


@fsq("content", "What's the station ID in the weather station's config file?")
def _(root):
    return contains(json.loads(read(root, "projects/weather-station/src/config.json"))["station_id"])


@fsq("content", "On what date do I check in to the hotel in Lisbon? Answer as YYYY-MM-DD.")
def _(root):
    return contains(json.loads(read(root, "travel/lisbon/bookings.json"))["hotel"]["check_in"])


@fsq("chained", "Find the folder in my workspace that directly holds the most files. How big, in bytes, is the largest file in it?")
def _(root):
    counts = {os.path.relpath(d, root): len(fs) for d, _, fs in os.walk(root)}
    folder = unique_max(counts)
    return max(size(root, p) for p in files_in(root, folder))


@fsq("chained", "Which project has the most Python files, and what's the name of the biggest Python file in it? Just the file name is fine.")
def _(root):
    names = [n for n in os.listdir(os.path.join(root, "projects")) if os.path.isdir(os.path.join(root, "projects", n))]
    proj = unique_max({n: sum(p.endswith(".py") for p in all_files(root, f"projects/{n}")) for n in names})
    py = {p: size(root, p) for p in all_files(root, f"projects/{proj}") if p.endswith(".py")}
    return contains(os.path.basename(unique_max(py)))


@fsq("chained", "In the garden planner's plant list, which plant takes the longest to harvest, and which family does it belong to? I only need the family.")
def _(root):
    rows = csv_rows(root, "projects/garden-planner/data/plants.csv")
    best = unique_max({r["name"]: int(r["days_to_harvest"]) for r in rows})
    return contains(next(r["family"] for r in rows if r["name"] == best))


@fsq("chained", "Take my longest monthly note from 2024 (January to June). How many bullet points are in it?")
def _(root):
    months = {m: size(root, f"notes/2024/{m}.md") for m in MONTHS if os.path.exists(os.path.join(root, f"notes/2024/{m}.md"))}
    m = unique_max(months)
    return sum(ln.startswith("- ") for ln in read(root, f"notes/2024/{m}.md").splitlines())


@fsq("chained", "Which expense category did I spend the most on in the budget tracker's 2024 expenses, and what's the budget set for that category in its categories file?")
def _(root):
    tot = {}
    for r in csv_rows(root, "projects/budget-tracker/data/expenses-2024.csv"):
        tot[r["category"]] = tot.get(r["category"], 0) + float(r["amount"])
    cat = unique_max(tot)
    return json.loads(read(root, "projects/budget-tracker/src/categories.json"))[cat]["budget"]


# -- git helpers: answers from `git` on the repository -------------------------------------------

def lines(text):
    return [ln for ln in text.splitlines() if ln.strip()]


def by_subject(repo, subject):
    """The hash of the one commit (on any branch) with this subject."""
    found = [ln.split(" ", 1)[0] for ln in lines(git(repo, "log", "--all", "--format=%H %s")) if ln.split(" ", 1)[1] == subject]
    assert len(found) == 1, f"{subject!r}: {found}"
    return found[0]


def fmt(repo, rev, f):
    return git(repo, "show", "-s", f"--format={f}", rev).strip()


def branches(repo):
    return lines(git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads"))


def merged(repo, branch):
    return subprocess.run(["git", "-C", repo, "merge-base", "--is-ancestor", branch, "main"], check=False, env=git_env()).returncode == 0


def file_event(repo, path, status):
    """The one commit on main whose change to `path` has this status (A added, D deleted)."""
    found = lines(git(repo, "log", "main", "--format=%H", f"--diff-filter={status}", "--", path))
    assert len(found) == 1, (path, status, found)
    return found[0]


def authors_on_main(repo):
    counts = {}
    for a in lines(git(repo, "log", "main", "--format=%an")):
        counts[a] = counts.get(a, 0) + 1
    return counts


# -- git questions (the {repo} placeholder becomes the repository's absolute path) ---------------

@gitq("lookup", "Who wrote the commit called \"Handle empty input files\" in the repository at {repo}?")
def _(repo):
    return contains(fmt(repo, by_subject(repo, "Handle empty input files"), "%an"))


@gitq("lookup", "On what date was the \"Fix off-by-one in pager\" commit made in the git repository at {repo}? Give it as YYYY-MM-DD.")
def _(repo):
    return contains(git(repo, "show", "-s", "--format=%ad", "--date=short", by_subject(repo, "Fix off-by-one in pager")).strip())


@gitq("lookup", "Which commit is tagged v0.1.0 in {repo}? Tell me its commit message.")
def _(repo):
    return contains(fmt(repo, "v0.1.0^{commit}", "%s"))


@gitq("lookup", "What's the full hash of the commit that the v0.2.0 tag points to in the repo at {repo}?")
def _(repo):
    return contains(git(repo, "rev-parse", "v0.2.0^{commit}").strip())


@gitq("lookup", "What email address does Dana Kowalski use for her commits in {repo}?")
def _(repo):
    emails = {ln.split("|")[1] for ln in lines(git(repo, "log", "--all", "--format=%an|%ae")) if ln.startswith("Dana Kowalski|")}
    assert len(emails) == 1, emails
    return contains(emails.pop())


@gitq("lookup", "Which branch is checked out right now in the repository at {repo}?")
def _(repo):
    return contains(git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip())


@gitq("lookup", "What's the message of the latest commit on the fix/pager branch of {repo}?")
def _(repo):
    return contains(fmt(repo, "fix/pager", "%s"))


@gitq("count", "How many commits are there on the main branch of the repository at {repo}, merge commits included?")
def _(repo):
    return int(git(repo, "rev-list", "--count", "main"))


@gitq("count", "How many commits has Dana Kowalski made on main in {repo}?")
def _(repo):
    return authors_on_main(repo)["Dana Kowalski"]


@gitq("count", "How many branches does the repository at {repo} have?")
def _(repo):
    return len(branches(repo))


@gitq("count", "How many commits on the fix/pager branch of {repo} aren't on main yet?")
def _(repo):
    return int(git(repo, "rev-list", "--count", "main..fix/pager"))


@gitq("count", "How many files did the \"Move usage docs into the README\" commit in the repository at {repo} change?")
def _(repo):
    return len(lines(git(repo, "show", "--name-only", "--format=", by_subject(repo, "Move usage docs into the README"))))


@gitq("count", "How many merge commits does the main branch of {repo} have?")
def _(repo):
    return int(git(repo, "rev-list", "--count", "--merges", "main"))


@gitq("count", "How many commits were made on main in {repo} during January 2024?")
def _(repo):
    return sum(d.startswith("2024-01") for d in lines(git(repo, "log", "main", "--format=%ad", "--date=short")))


@gitq("minmax", "Who has made the most commits on the main branch of the repository at {repo}?")
def _(repo):
    return contains(unique_max(authors_on_main(repo)))


@gitq("minmax", "Who has the fewest commits on main in {repo}?")
def _(repo):
    return contains(unique_min(authors_on_main(repo)))


@gitq("minmax", "What's the earliest commit on the docs/install branch of {repo} that isn't on main? Give its message.")
def _(repo):
    return contains(lines(git(repo, "log", "--reverse", "--format=%s", "main..docs/install"))[0])


@gitq("minmax", "In which month of 2024 were the most commits made on the main branch of {repo}?")
def _(repo):
    counts = {}
    for d in lines(git(repo, "log", "main", "--format=%ad", "--date=format:%B")):
        counts[d] = counts.get(d, 0) + 1
    return contains(unique_max(counts))


@gitq("minmax", "What is the most recent commit on main in the repository at {repo}? Tell me its message.")
def _(repo):
    return contains(fmt(repo, "main", "%s"))


@gitq("minmax", "Which single commit on main in {repo} added the most lines? Give its message.")
def _(repo):
    added, cur = {}, None
    for ln in git(repo, "log", "main", "--no-merges", "--numstat", "--format=@%s").splitlines():
        if ln.startswith("@"):
            cur = ln[1:]
            added[cur] = 0
        elif ln.strip():
            added[cur] += int(ln.split("\t")[0])
    return contains(unique_max(added))


@gitq("existence", "Is there still a file called src/reader.py on the main branch of {repo}?")
def _(repo):
    return yes_no("src/reader.py" in lines(git(repo, "ls-tree", "-r", "--name-only", "main")))


@gitq("existence", "Does the repository at {repo} have a branch named fix/pager?")
def _(repo):
    return yes_no("fix/pager" in branches(repo))


@gitq("existence", "Is there a v1.0.0 tag in {repo}?")
def _(repo):
    return yes_no("v1.0.0" in lines(git(repo, "tag")))


@gitq("existence", "Has the feature/search branch of {repo} been merged into main?")
def _(repo):
    return yes_no(merged(repo, "feature/search"))


@gitq("existence", "Has the docs/install branch in {repo} been merged into main yet?")
def _(repo):
    return yes_no(merged(repo, "docs/install"))


@gitq("chained", "Who wrote the commit that added src/export.py to the repository at {repo}?")
def _(repo):
    return contains(fmt(repo, file_event(repo, "src/export.py", "A"), "%an"))


@gitq("chained", "Who deleted docs/notes.md from {repo}?")
def _(repo):
    return contains(fmt(repo, file_event(repo, "docs/notes.md", "D"), "%an"))


@gitq("chained", "src/loader.py in {repo} had a different name before it was renamed. What was it called?")
def _(repo):
    out = git(repo, "log", "main", "--follow", "-M", "--name-status", "--format=", "--", "src/loader.py")
    renames = [ln.split("\t") for ln in lines(out) if ln.startswith("R")]
    assert len(renames) == 1, renames
    return contains(renames[0][1])


@gitq("chained", "Exactly one of the other branches of {repo} has been merged into main. Who wrote the last commit on that branch?")
def _(repo):
    done = [b for b in branches(repo) if b != "main" and merged(repo, b)]
    assert len(done) == 1, done
    return contains(fmt(repo, done[0], "%an"))


@gitq("chained", "When were the pager tests (tests/test_pager.py) first added to {repo}? Give the date as YYYY-MM-DD.")
def _(repo):
    return contains(git(repo, "show", "-s", "--format=%ad", "--date=short", file_event(repo, "tests/test_pager.py", "A")).strip())


@gitq("chained", "Who is the author of the commit that the v0.2.0 tag points to in {repo}?")
def _(repo):
    return contains(fmt(repo, "v0.2.0^{commit}", "%an"))


@gitq("filter", "List the messages of all the commits on main in {repo} that changed src/pager.py.")
def _(repo):
    return set_of(lines(git(repo, "log", "main", "--format=%s", "--", "src/pager.py")))


@gitq("filter", "Which files did the \"Add CSV export\" commit in {repo} touch?")
def _(repo):
    return set_of(lines(git(repo, "show", "--name-only", "--format=", by_subject(repo, "Add CSV export"))))


@gitq("filter", "List the commits Chidi Okafor made on the main branch of {repo} (their messages are enough).")
def _(repo):
    return set_of(lines(git(repo, "log", "main", "--author=Chidi Okafor", "--format=%s")))


@gitq("filter", "Which commits on main in the repository at {repo} were made in April 2024? List their messages.")
def _(repo):
    return set_of(ln.split(" ", 1)[1] for ln in lines(git(repo, "log", "main", "--format=%ad %s", "--date=short"))
                  if ln.startswith("2024-04"))


@gitq("filter", "Which branches of {repo} contain the commit \"Add column width detection\"?")
def _(repo):
    return set_of(lines(git(repo, "for-each-ref", "--format=%(refname:short)", "--contains",
                            by_subject(repo, "Add column width detection"), "refs/heads")))


@gitq("content", "How many test functions were added by the \"Add tests for the pager\" commit in {repo}?")
def _(repo):
    diff = git(repo, "show", "--format=", by_subject(repo, "Add tests for the pager"))
    return sum(ln.startswith("+def test_") for ln in diff.splitlines())


@gitq("content", "How many lines in total did the \"Add CSV export\" commit add in {repo}?")
def _(repo):
    return sum(int(ln.split("\t")[0]) for ln in lines(git(repo, "show", "--numstat", "--format=", by_subject(repo, "Add CSV export"))))


@gitq("content", "What version does setup.cfg on the main branch of {repo} declare right now?")
def _(repo):
    line = next(ln for ln in git(repo, "show", "main:setup.cfg").splitlines() if ln.startswith("version"))
    return contains(line.split("=", 1)[1].strip())


@gitq("content", "What's the newest release listed in the changelog (CHANGELOG.md) on main in {repo}?")
def _(repo):
    return contains(next(ln for ln in git(repo, "show", "main:CHANGELOG.md").splitlines() if ln.startswith("## "))[3:].strip())


@gitq("content", "What's the name of the project according to the first heading of README.md on main in {repo}?")
def _(repo):
    return contains(first_heading(git(repo, "show", "main:README.md")))


# -- writing a check set -------------------------------------------------------------------------

def check_set(kind, fixture):
    """The check set's records for a built fixture (fixture: the workspace or repository directory)."""
    fixture = os.path.abspath(fixture)
    bank = {"fs": FS_QUESTIONS, "git": GIT_QUESTIONS}[kind]
    out = []
    for i, (tag, task, fn) in enumerate(bank, 1):
        expected = fn(fixture)
        if kind == "git":
            task = task.format(repo=fixture)
        out.append({"id": f"{kind}-{i:03d}", "task": task, "expected": expected, "split": "validation",
                    "tags": ["check-set", kind, tag], "source": "check-set"})
    return out


def write_check_set(kind, fixture, out_path):
    records = check_set(kind, fixture)
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return records


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, what in [("fs", "DIR"), ("git", "DIR"), ("memory", "FILE")]:
        p = sub.add_parser(name)
        p.add_argument("target", metavar=what)
        p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("check-set")
    p.add_argument("kind", choices=["fs", "git"])
    p.add_argument("fixture", metavar="FIXTURE_DIR")
    p.add_argument("out", metavar="OUT.jsonl")
    a = ap.parse_args(argv)
    if a.cmd == "fs":
        build_fs(a.target, a.seed)
    elif a.cmd == "git":
        build_git(a.target, a.seed)
    elif a.cmd == "memory":
        build_memory(a.target, a.seed)
    else:
        n = len(write_check_set(a.kind, a.fixture, a.out))
        print(f"{n} questions written to {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
