"""Two seeded SQLite databases for the third-party-server runs (benches/third_party_e2e.sh).

They are unlike the demo's company database on purpose: a shop (customers, products, orders,
order lines) and a clinic (doctors, patients, appointments, prescriptions), so a trained adapter's
gain cannot come from having seen the demo schema. Seeded, so every run sees the same rows.

    python3 benches/third_party_dbs.py OUT_DIR   # writes OUT_DIR/shop.db and OUT_DIR/clinic.db
"""

import random
import sqlite3
import sys
from datetime import date, timedelta
from pathlib import Path

FIRST = ["Ada", "Bruno", "Chen", "Dana", "Emil", "Fatima", "Goran", "Hana", "Ivan", "Jun", "Kofi", "Lena",
         "Mateo", "Nora", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tara", "Uma", "Viktor", "Wen", "Yusuf"]
LAST = ["Alvarez", "Becker", "Costa", "Dubois", "Eriksen", "Fischer", "Gupta", "Haddad", "Ito", "Jensen",
        "Kowalski", "Lindqvist", "Moreau", "Novak", "Okafor", "Petrov", "Rossi", "Sato", "Tanaka", "Weber"]
CITIES = ["Lisbon", "Oslo", "Kyoto", "Austin", "Nairobi", "Porto", "Zagreb", "Lyon", "Quito", "Dublin"]


def names(rng: random.Random, n: int) -> list[str]:
    out: set[str] = set()
    while len(out) < n:
        out.add(f"{rng.choice(FIRST)} {rng.choice(LAST)}")
    return sorted(out)


def day(rng: random.Random, start: date, span: int) -> str:
    return (start + timedelta(days=rng.randrange(span))).isoformat()


def shop(path: Path, rng: random.Random) -> None:
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL,
                                signup_date TEXT NOT NULL, loyalty_tier TEXT NOT NULL);
        CREATE TABLE products (product_id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL,
                               unit_price REAL NOT NULL, in_stock INTEGER NOT NULL);
        CREATE TABLE orders (order_id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(customer_id),
                             order_date TEXT NOT NULL, status TEXT NOT NULL, shipping_city TEXT NOT NULL);
        CREATE TABLE order_items (item_id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL REFERENCES orders(order_id),
                                  product_id INTEGER NOT NULL REFERENCES products(product_id), quantity INTEGER NOT NULL,
                                  discount REAL NOT NULL);
    """)
    customers = names(rng, 80)
    for i, n in enumerate(customers, 1):
        db.execute("INSERT INTO customers VALUES (?,?,?,?,?)",
                   (i, n, rng.choice(CITIES), day(rng, date(2022, 1, 1), 900), rng.choice(["bronze", "silver", "gold"])))
    cats = {"kitchen": ["Kettle", "Pan", "Knife Set", "Blender", "Toaster"], "garden": ["Hose", "Rake", "Planter", "Shears"],
            "office": ["Desk Lamp", "Stapler", "Notebook", "Chair Mat", "Monitor Arm"], "outdoor": ["Tent", "Lantern", "Backpack", "Stove"]}
    pid = 0
    for cat, items in cats.items():
        for base in items:
            for variant in ["Basic", "Pro"]:
                pid += 1
                db.execute("INSERT INTO products VALUES (?,?,?,?,?)",
                           (pid, f"{base} {variant}", cat, round(rng.uniform(4, 180), 2), rng.randrange(0, 120)))
    item = 0
    for oid in range(1, 401):
        db.execute("INSERT INTO orders VALUES (?,?,?,?,?)",
                   (oid, rng.randrange(1, len(customers) + 1), day(rng, date(2023, 1, 1), 700),
                    rng.choices(["delivered", "shipped", "cancelled", "pending"], [6, 2, 1, 1])[0], rng.choice(CITIES)))
        for _ in range(rng.randrange(1, 5)):
            item += 1
            db.execute("INSERT INTO order_items VALUES (?,?,?,?,?)",
                       (item, oid, rng.randrange(1, pid + 1), rng.randrange(1, 6), rng.choice([0.0, 0.0, 0.05, 0.1, 0.2])))
    db.commit()
    db.close()


def clinic(path: Path, rng: random.Random) -> None:
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE doctors (doctor_id INTEGER PRIMARY KEY, name TEXT NOT NULL, specialty TEXT NOT NULL,
                              hired_year INTEGER NOT NULL, room TEXT NOT NULL);
        CREATE TABLE patients (patient_id INTEGER PRIMARY KEY, name TEXT NOT NULL, birth_year INTEGER NOT NULL,
                               city TEXT NOT NULL, insurance TEXT NOT NULL);
        CREATE TABLE appointments (appointment_id INTEGER PRIMARY KEY, patient_id INTEGER NOT NULL REFERENCES patients(patient_id),
                                   doctor_id INTEGER NOT NULL REFERENCES doctors(doctor_id), visit_date TEXT NOT NULL,
                                   duration_min INTEGER NOT NULL, outcome TEXT NOT NULL, fee REAL NOT NULL);
        CREATE TABLE prescriptions (prescription_id INTEGER PRIMARY KEY, appointment_id INTEGER NOT NULL REFERENCES appointments(appointment_id),
                                    drug TEXT NOT NULL, dose_mg INTEGER NOT NULL, days INTEGER NOT NULL);
    """)
    specialties = ["cardiology", "dermatology", "neurology", "pediatrics", "orthopedics", "general practice"]
    docs = names(rng, 18)
    for i, n in enumerate(docs, 1):
        db.execute("INSERT INTO doctors VALUES (?,?,?,?,?)",
                   (i, f"Dr. {n}", rng.choice(specialties), rng.randrange(1995, 2025), f"{rng.choice('ABC')}{rng.randrange(100, 400)}"))
    pats = names(rng, 150)
    for i, n in enumerate(pats, 1):
        db.execute("INSERT INTO patients VALUES (?,?,?,?,?)",
                   (i, n, rng.randrange(1940, 2022), rng.choice(CITIES), rng.choice(["public", "private", "none"])))
    drugs = ["amoxicillin", "ibuprofen", "metformin", "lisinopril", "atorvastatin", "cetirizine", "omeprazole"]
    rx = 0
    for aid in range(1, 501):
        db.execute("INSERT INTO appointments VALUES (?,?,?,?,?,?,?)",
                   (aid, rng.randrange(1, len(pats) + 1), rng.randrange(1, len(docs) + 1), day(rng, date(2023, 6, 1), 540),
                    rng.choice([15, 20, 30, 45, 60]), rng.choices(["treated", "referred", "follow-up", "no-show"], [5, 1, 2, 1])[0],
                    round(rng.uniform(40, 320), 2)))
        if rng.random() < 0.45:
            rx += 1
            db.execute("INSERT INTO prescriptions VALUES (?,?,?,?,?)",
                       (rx, aid, rng.choice(drugs), rng.choice([5, 10, 20, 250, 500]), rng.choice([5, 7, 10, 14, 30])))
    db.commit()
    db.close()


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, build in [("shop.db", shop), ("clinic.db", clinic)]:
        (out / name).unlink(missing_ok=True)
        build(out / name, random.Random(name))
        print(out / name)


if __name__ == "__main__":
    main()
