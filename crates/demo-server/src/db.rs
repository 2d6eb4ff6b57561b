//! The company database: schema and deterministic data.
//!
//! Everything is generated from a fixed seed with a hand-written PRNG (splitmix64) rather than
//! the `rand` crate, so the rows cannot drift when a dependency changes its algorithms: the
//! scenario answers in `scenarios/company.jsonl` depend on every value here. The data is messy
//! on purpose (missing managers, former employees, contractors without salary, open-ended
//! projects, NULL hours), because an agent has to learn to handle exactly that.

use rusqlite::{Connection, params};

/// Seed of the generator. Changing it (or anything below) changes the scenario answers.
const SEED: u64 = 0x7a_de30_c0de;

/// The tables, in dependency order, with a one-line purpose shown by `list_tables`.
pub const TABLES: &[(&str, &str)] = &[
    ("departments", "the company's departments: location, annual budget, head of department"),
    ("employees", "everyone who works or has worked at the company, including contractors and former employees"),
    ("projects", "projects, each owned by one department: status, dates, budget, project lead"),
    ("project_assignments", "which employees work on which projects (many-to-many): role and weekly hours"),
];

const SCHEMA: &str = "
CREATE TABLE departments (
    department_id    INTEGER PRIMARY KEY,
    name             TEXT NOT NULL UNIQUE,
    location         TEXT NOT NULL,
    annual_budget    INTEGER NOT NULL,
    head_employee_id INTEGER REFERENCES employees(employee_id),
    founded_date     TEXT NOT NULL
);
CREATE TABLE employees (
    employee_id      INTEGER PRIMARY KEY,
    first_name       TEXT NOT NULL,
    last_name        TEXT NOT NULL,
    email            TEXT,
    job_title        TEXT NOT NULL,
    department_id    INTEGER REFERENCES departments(department_id),
    manager_id       INTEGER REFERENCES employees(employee_id),
    employment_type  TEXT NOT NULL CHECK (employment_type IN ('full_time', 'part_time', 'contractor')),
    status           TEXT NOT NULL CHECK (status IN ('active', 'on_leave', 'terminated')),
    hire_date        TEXT NOT NULL,
    termination_date TEXT,
    salary           INTEGER,
    hourly_rate      REAL,
    office_location  TEXT NOT NULL
);
CREATE TABLE projects (
    project_id       INTEGER PRIMARY KEY,
    name             TEXT NOT NULL UNIQUE,
    department_id    INTEGER NOT NULL REFERENCES departments(department_id),
    lead_employee_id INTEGER REFERENCES employees(employee_id),
    status           TEXT NOT NULL CHECK (status IN ('planned', 'active', 'on_hold', 'completed', 'cancelled')),
    start_date       TEXT,
    end_date         TEXT,
    budget           INTEGER
);
CREATE TABLE project_assignments (
    employee_id      INTEGER NOT NULL REFERENCES employees(employee_id),
    project_id       INTEGER NOT NULL REFERENCES projects(project_id),
    role             TEXT NOT NULL,
    hours_per_week   REAL,
    assigned_date    TEXT NOT NULL,
    PRIMARY KEY (employee_id, project_id)
);
";

/// Builds a fresh, writable in-memory copy of the database. Every call yields identical rows.
/// Meant for tests and for computing reference answers; the MCP tools use a read-only copy.
pub fn database() -> Connection {
    let conn = Connection::open_in_memory().expect("sqlite in-memory database opens");
    build(&conn).expect("the demo data is valid");
    conn
}

fn build(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(SCHEMA)?;
    let data = generate();
    // departments name their heads before the employees exist: check foreign keys at COMMIT.
    conn.execute_batch("BEGIN; PRAGMA defer_foreign_keys = ON;")?;
    {
        let mut ins = conn.prepare("INSERT INTO departments VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?;
        for d in &data.departments {
            ins.execute(params![d.id, d.name, d.location, d.budget, d.head, d.founded])?;
        }
        let mut ins = conn.prepare("INSERT INTO employees VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)")?;
        for e in &data.employees {
            ins.execute(params![
                e.id,
                e.first,
                e.last,
                e.email,
                e.title,
                e.department,
                e.manager,
                e.kind,
                e.status,
                e.hired,
                e.terminated,
                e.salary,
                e.hourly_rate,
                e.office
            ])?;
        }
        let mut ins = conn.prepare("INSERT INTO projects VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")?;
        for p in &data.projects {
            ins.execute(params![p.id, p.name, p.department, p.lead, p.status, p.start, p.end, p.budget])?;
        }
        let mut ins = conn.prepare("INSERT INTO project_assignments VALUES (?1, ?2, ?3, ?4, ?5)")?;
        for a in &data.assignments {
            ins.execute(params![a.employee, a.project, a.role, a.hours, a.assigned])?;
        }
    }
    conn.execute_batch("COMMIT")?;
    Ok(())
}

/// splitmix64: tiny, fast, and fixed forever.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % ((hi - lo + 1) as u64)) as i64
    }
    /// True with probability `percent`/100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() % items.len() as u64) as usize]
    }
}

/// Days since 2000-01-01 to an ISO date; enough calendar for 2000..2099.
fn date(mut days: i64) -> String {
    let mut year = 2000;
    loop {
        let len = if year % 4 == 0 { 366 } else { 365 };
        if days < len {
            break;
        }
        days -= len;
        year += 1;
    }
    let months = [31, if year % 4 == 0 { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let mut month = 0;
    while days >= months[month] {
        days -= months[month];
        month += 1;
    }
    format!("{year:04}-{:02}-{:02}", month + 1, days + 1)
}

/// Days since 2000-01-01 of the first day of `year`.
fn year_start(year: i64) -> i64 {
    (2000..year).map(|y| if y % 4 == 0 { 366 } else { 365 }).sum()
}

struct Department {
    id: i64,
    name: &'static str,
    location: &'static str,
    budget: i64,
    head: Option<i64>,
    founded: String,
}

struct Employee {
    id: i64,
    first: &'static str,
    last: &'static str,
    email: Option<String>,
    title: String,
    department: Option<i64>,
    manager: Option<i64>,
    kind: &'static str,
    status: &'static str,
    hired: String,
    hired_day: i64,
    terminated: Option<String>,
    salary: Option<i64>,
    hourly_rate: Option<f64>,
    office: &'static str,
}

struct Project {
    id: i64,
    name: &'static str,
    department: i64,
    lead: Option<i64>,
    status: &'static str,
    start: Option<String>,
    end: Option<String>,
    budget: Option<i64>,
}

struct Assignment {
    employee: i64,
    project: i64,
    role: &'static str,
    hours: Option<f64>,
    assigned: String,
}

struct Data {
    departments: Vec<Department>,
    employees: Vec<Employee>,
    projects: Vec<Project>,
    assignments: Vec<Assignment>,
}

/// (name, location, annual budget, founded year, relative head count, job titles, base salary)
type DepartmentSpec = (&'static str, &'static str, i64, i64, u64, &'static [&'static str], i64);

const DEPARTMENTS: &[DepartmentSpec] = &[
    (
        "Engineering",
        "San Francisco",
        4_200_000,
        2009,
        30,
        &["Software Engineer", "Senior Software Engineer", "Staff Engineer", "QA Engineer", "DevOps Engineer", "Engineering Manager"],
        128_000,
    ),
    ("Sales", "New York", 2_650_000, 2009, 16, &["Account Executive", "Sales Development Rep", "Account Manager", "Sales Engineer", "Regional Sales Manager"], 86_000),
    ("Marketing", "New York", 1_480_000, 2010, 10, &["Marketing Specialist", "Content Writer", "Product Marketing Manager", "Growth Analyst", "Brand Designer"], 82_000),
    ("Finance", "Chicago", 910_000, 2009, 7, &["Financial Analyst", "Accountant", "Controller", "Payroll Specialist"], 92_000),
    ("Human Resources", "Chicago", 640_000, 2011, 6, &["HR Generalist", "Recruiter", "HR Business Partner", "Benefits Coordinator"], 74_000),
    ("Customer Support", "Austin", 1_120_000, 2012, 14, &["Support Specialist", "Senior Support Specialist", "Support Team Lead", "Technical Support Engineer"], 58_000),
    ("Research", "Boston", 2_080_000, 2014, 9, &["Research Scientist", "Data Scientist", "Research Engineer", "ML Engineer"], 135_000),
    ("Legal", "Washington", 730_000, 2013, 4, &["Corporate Counsel", "Paralegal", "Compliance Officer"], 118_000),
    ("Operations", "Denver", 1_260_000, 2023, 6, &["Operations Analyst", "Facilities Coordinator", "Procurement Specialist", "IT Administrator"], 71_000),
];

const FIRST_NAMES: &[&str] = &[
    "James",
    "Mary",
    "Robert",
    "Patricia",
    "John",
    "Jennifer",
    "Michael",
    "Linda",
    "David",
    "Elizabeth",
    "William",
    "Barbara",
    "Richard",
    "Susan",
    "Joseph",
    "Jessica",
    "Thomas",
    "Sarah",
    "Carlos",
    "Karen",
    "Daniel",
    "Lisa",
    "Matthew",
    "Nancy",
    "Anthony",
    "Sandra",
    "Mark",
    "Ashley",
    "Priya",
    "Emily",
    "Steven",
    "Donna",
    "Andrew",
    "Michelle",
    "Kenji",
    "Carol",
    "Joshua",
    "Amanda",
    "Wei",
    "Melissa",
    "Kevin",
    "Deborah",
    "Brian",
    "Stephanie",
    "Omar",
    "Rebecca",
    "Diego",
    "Laura",
    "Ahmed",
    "Fatima",
    "Hiroshi",
    "Sofia",
    "Lucas",
    "Chloe",
    "Ivan",
    "Aisha",
    "Mateo",
    "Grace",
    "Raj",
    "Olivia",
];

const LAST_NAMES: &[&str] = &[
    "Smith",
    "Johnson",
    "Williams",
    "Brown",
    "Jones",
    "Garcia",
    "Miller",
    "Davis",
    "Rodriguez",
    "Martinez",
    "Hernandez",
    "Lopez",
    "Gonzalez",
    "Wilson",
    "Anderson",
    "Thomas",
    "Taylor",
    "Moore",
    "Jackson",
    "Martin",
    "Lee",
    "Perez",
    "Thompson",
    "White",
    "Harris",
    "Sanchez",
    "Clark",
    "Ramirez",
    "Lewis",
    "Robinson",
    "Walker",
    "Young",
    "Allen",
    "King",
    "Wright",
    "Scott",
    "Torres",
    "Nguyen",
    "Hill",
    "Flores",
    "Patel",
    "Kim",
    "Chen",
    "Singh",
    "Tanaka",
    "Okafor",
    "Novak",
    "Rossi",
    "Schmidt",
    "Kowalski",
];

const OFFICES: &[&str] = &["San Francisco", "New York", "Chicago", "Austin", "Boston", "Washington", "Denver", "Remote"];

/// (name, owning department index, status)
const PROJECTS: &[(&str, usize, &str)] = &[
    ("Atlas Platform Rewrite", 0, "active"),
    ("Mobile App 3.0", 0, "active"),
    ("Payments Gateway", 0, "completed"),
    ("Kubernetes Migration", 0, "completed"),
    ("Search Relevance", 0, "on_hold"),
    ("Edge Caching", 0, "planned"),
    ("Enterprise Expansion", 1, "active"),
    ("CRM Consolidation", 1, "completed"),
    ("Partner Channel Program", 1, "cancelled"),
    ("APAC Market Entry", 1, "planned"),
    ("Brand Refresh", 2, "completed"),
    ("Spring Campaign", 2, "completed"),
    ("Developer Community", 2, "active"),
    ("Website Redesign", 2, "active"),
    ("ERP Upgrade", 3, "active"),
    ("Quarterly Close Automation", 3, "completed"),
    ("Expense Policy Revamp", 3, "cancelled"),
    ("Talent Pipeline", 4, "active"),
    ("Onboarding Portal", 4, "completed"),
    ("Self-Service Help Center", 5, "active"),
    ("Ticket Triage Bot", 5, "on_hold"),
    ("Support Analytics Dashboard", 5, "completed"),
    ("Recommendation Engine", 6, "active"),
    ("Fraud Detection Model", 6, "completed"),
    ("Language Model Pilot", 6, "planned"),
    ("Causal Inference Toolkit", 6, "cancelled"),
    ("GDPR Compliance Audit", 7, "completed"),
    ("Contract Management System", 7, "active"),
];

const ROLES: &[&str] = &["Developer", "Analyst", "Designer", "Reviewer", "Consultant", "Coordinator", "Tester"];

fn generate() -> Data {
    let mut rng = Rng(SEED);
    let mut departments: Vec<Department> = DEPARTMENTS
        .iter()
        .enumerate()
        .map(|(i, &(name, location, budget, founded, ..))| Department {
            id: i as i64 + 1,
            name,
            location,
            budget,
            head: None,
            founded: date(year_start(founded) + rng.range(0, 300)),
        })
        .collect();

    let mut used_names = std::collections::HashSet::new();
    let mut unique_name = |rng: &mut Rng| loop {
        let pair = (*rng.pick(FIRST_NAMES), *rng.pick(LAST_NAMES));
        if used_names.insert(pair) {
            return pair;
        }
    };
    let email = |first: &str, last: &str| format!("{}.{}@example.com", first.to_lowercase(), last.to_lowercase());

    let mut employees: Vec<Employee> = Vec::new();
    // The CEO belongs to no department and reports to no one.
    let (first, last) = unique_name(&mut rng);
    let ceo_hired = year_start(2009) + 20;
    employees.push(Employee {
        id: 1,
        first,
        last,
        email: Some(email(first, last)),
        title: "Chief Executive Officer".into(),
        department: None,
        manager: None,
        kind: "full_time",
        status: "active",
        hired: date(ceo_hired),
        hired_day: ceo_hired,
        terminated: None,
        salary: Some(310_000),
        hourly_rate: None,
        office: "San Francisco",
    });

    // Department heads (the newest department, Operations, has none yet).
    for (i, &(name, location, _, founded, _, _, base)) in DEPARTMENTS.iter().enumerate() {
        if name == "Operations" {
            continue;
        }
        let (first, last) = unique_name(&mut rng);
        let id = employees.len() as i64 + 1;
        let hired = year_start(founded) + rng.range(0, 700);
        employees.push(Employee {
            id,
            first,
            last,
            email: Some(email(first, last)),
            title: format!("Head of {name}"),
            department: Some(i as i64 + 1),
            manager: Some(1),
            kind: "full_time",
            status: "active",
            hired: date(hired),
            hired_day: hired,
            terminated: None,
            salary: Some(base * 2 + rng.range(0, 40) * 500),
            hourly_rate: None,
            office: location,
        });
        departments[i].head = Some(id);
    }

    // Everyone else, with department chosen by head-count weight.
    let total_weight: u64 = DEPARTMENTS.iter().map(|d| d.4).sum();
    let first_regular = employees.len() as i64 + 1;
    let regular_count = 232;
    for _ in 0..regular_count {
        let mut r = rng.next() % total_weight;
        let mut d = 0;
        while r >= DEPARTMENTS[d].4 {
            r -= DEPARTMENTS[d].4;
            d += 1;
        }
        let (_, location, _, founded, _, titles, base) = DEPARTMENTS[d];
        let id = employees.len() as i64 + 1;
        let (first, last) = unique_name(&mut rng);
        let kind = match rng.next() % 100 {
            0..=80 => "full_time",
            81..=87 => "part_time",
            _ => "contractor",
        };
        let earliest = year_start(founded.max(2012));
        let hired = rng.range(earliest, year_start(2024) + 250);
        let leaves = kind != "contractor" && rng.chance(13) || kind == "contractor" && rng.chance(25);
        let (status, terminated) = if leaves {
            let cutoff = year_start(2025) - 10;
            let end = hired + rng.range(60, (cutoff - hired).clamp(61, 2400));
            ("terminated", Some(date(end.min(cutoff).max(hired + 30))))
        } else if rng.chance(3) {
            ("on_leave", None)
        } else {
            ("active", None)
        };
        let title_index = (rng.next() % titles.len() as u64) as usize;
        let title = titles[title_index];
        let (salary, hourly_rate) = match kind {
            "contractor" if rng.chance(70) => (None, Some(rng.range(45, 160) as f64 + if rng.chance(30) { 0.5 } else { 0.0 })),
            "contractor" => (Some(base + rng.range(-10, 30) * 500), None),
            "part_time" => (Some((base + rng.range(-10, 30) * 500) / 2), None),
            _ => {
                let seniority = title_index as i64 * 4_000 + (year_start(2025) - hired) / 365 * 1_500;
                (Some(base + seniority + rng.range(-16, 24) * 500), None)
            }
        };
        // Some departments sit outside their home office; a few people are remote.
        let office = if rng.chance(12) { *rng.pick(OFFICES) } else { location };
        let mail = if kind == "contractor" && rng.chance(35) { None } else { Some(email(first, last)) };
        employees.push(Employee {
            id,
            first,
            last,
            email: mail,
            title: title.to_string(),
            department: Some(d as i64 + 1),
            manager: None,
            kind,
            status,
            hired: date(hired),
            hired_day: hired,
            terminated,
            salary,
            hourly_rate,
            office,
        });
    }

    // Managers: each regular employee reports to the head of their department or to an earlier
    // hired colleague in it who is still employed; a few records lack the manager entirely.
    for i in (first_regular - 1) as usize..employees.len() {
        let dept = employees[i].department.expect("regular employees have a department");
        if rng.chance(3) {
            continue;
        }
        let head = departments[(dept - 1) as usize].head;
        let peers: Vec<i64> = employees[..i]
            .iter()
            .filter(|e| e.department == Some(dept) && e.status != "terminated" && e.kind == "full_time" && e.id >= first_regular)
            .map(|e| e.id)
            .take(3)
            .collect();
        employees[i].manager = if !peers.is_empty() && rng.chance(60) { Some(*rng.pick(&peers)) } else { head.or(Some(1)) };
    }

    // Projects.
    let mut projects = Vec::new();
    let mut used_budgets = std::collections::HashSet::new();
    for (i, &(name, d, status)) in PROJECTS.iter().enumerate() {
        let dept = d as i64 + 1;
        let start_day = match status {
            "planned" => year_start(2025) + rng.range(30, 300),
            "completed" | "cancelled" => year_start(2018) + rng.range(0, 1800),
            _ => year_start(2022) + rng.range(0, 900),
        };
        let end = match status {
            "completed" | "cancelled" => Some(date(start_day + rng.range(90, 700))),
            _ => None,
        };
        let candidates: Vec<i64> = employees
            .iter()
            .filter(|e| e.department == Some(dept) && e.kind == "full_time" && e.hired_day < start_day)
            .filter(|e| status == "completed" || status == "cancelled" || e.status != "terminated")
            .map(|e| e.id)
            .collect();
        let lead = if i % 11 == 4 || candidates.is_empty() { None } else { Some(*rng.pick(&candidates)) };
        // Budgets are distinct so that "largest"/"smallest" questions have one answer.
        let budget = if status == "planned" && i % 3 == 0 {
            None
        } else {
            loop {
                let b = rng.range(8, 240) * 5_000;
                if used_budgets.insert(b) {
                    break Some(b);
                }
            }
        };
        projects.push(Project {
            id: i as i64 + 1,
            name,
            department: dept,
            lead,
            status,
            start: if status == "planned" && i % 2 == 1 { None } else { Some(date(start_day)) },
            end,
            budget,
        });
    }

    // Assignments: the lead, a handful from the owning department, and some cross-department help.
    let mut assignments = Vec::new();
    for p in &projects {
        let mut members: Vec<(i64, &'static str)> = Vec::new();
        if let Some(lead) = p.lead {
            members.push((lead, "Lead"));
        }
        let own: Vec<i64> = employees.iter().filter(|e| e.department == Some(p.department) && !members.iter().any(|m| m.0 == e.id)).map(|e| e.id).collect();
        let others: Vec<i64> = employees.iter().filter(|e| e.department.is_some() && e.department != Some(p.department)).map(|e| e.id).collect();
        let want_own = rng.range(3, 10) as usize;
        let want_other = if rng.chance(80) { rng.range(1, 5) as usize } else { 0 };
        for (pool, want) in [(&own, want_own), (&others, want_other)] {
            let mut added = 0;
            let mut tries = 0;
            while added < want.min(pool.len()) && tries < 200 {
                tries += 1;
                let id = *rng.pick(pool);
                if !members.iter().any(|m| m.0 == id) {
                    members.push((id, *rng.pick(ROLES)));
                    added += 1;
                }
            }
        }
        let base_day = match &p.start {
            Some(s) => parse_day(s),
            None => year_start(2025) + 200,
        };
        for (employee, role) in members {
            let hours = if role == "Reviewer" && rng.chance(50) || rng.chance(4) { None } else { Some(rng.range(4, 80) as f64 / 2.0) };
            let offset = rng.range(-30, 60);
            let hired = employees[(employee - 1) as usize].hired_day;
            assignments.push(Assignment { employee, project: p.id, role, hours, assigned: date((base_day + offset).max(hired + 1)) });
        }
    }
    assignments.sort_by_key(|a| (a.project, a.employee));

    Data { departments, employees, projects, assignments }
}

/// Inverse of [`date`] for the dates generated here.
fn parse_day(s: &str) -> i64 {
    let year: i64 = s[0..4].parse().expect("year");
    let month: usize = s[5..7].parse().expect("month");
    let day: i64 = s[8..10].parse().expect("day");
    let months = [31, if year % 4 == 0 { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    year_start(year) + months[..month - 1].iter().sum::<i64>() + day - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(conn: &Connection) -> Vec<String> {
        let mut out = Vec::new();
        for (table, _) in TABLES {
            let mut stmt = conn.prepare(&format!("SELECT * FROM {table} ORDER BY 1, 2")).unwrap();
            let n = stmt.column_count();
            let rows = stmt
                .query_map([], |row| {
                    let cells: Vec<String> = (0..n).map(|i| format!("{:?}", row.get_ref(i).unwrap())).collect();
                    Ok(cells.join("|"))
                })
                .unwrap();
            out.extend(rows.map(|r| format!("{table}:{}", r.unwrap())));
        }
        out
    }

    #[test]
    fn two_builds_are_identical() {
        assert_eq!(dump(&database()), dump(&database()));
    }

    #[test]
    fn dates_round_trip() {
        for day in [0, 59, 365, 366, 4000, 9000] {
            assert_eq!(parse_day(&date(day)), day);
        }
        assert_eq!(date(year_start(2024) + 59), "2024-02-29");
    }

    #[test]
    fn foreign_keys_hold_and_data_is_messy() {
        let conn = database();
        let count = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
        assert!(count("SELECT count(*) FROM employees") >= 200);
        assert_eq!(
            count("SELECT count(*) FROM employees e LEFT JOIN employees m ON e.manager_id = m.employee_id WHERE e.manager_id IS NOT NULL AND m.employee_id IS NULL"),
            0
        );
        assert_eq!(count("SELECT count(*) FROM project_assignments a LEFT JOIN employees e USING (employee_id) WHERE e.employee_id IS NULL"), 0);
        assert!(count("SELECT count(*) FROM employees WHERE status = 'terminated'") > 10);
        assert!(count("SELECT count(*) FROM employees WHERE employment_type = 'contractor' AND salary IS NULL") > 3);
        assert!(count("SELECT count(*) FROM employees WHERE manager_id IS NULL AND department_id IS NOT NULL") > 0);
        assert!(count("SELECT count(*) FROM projects WHERE end_date IS NULL") > 0);
        assert!(count("SELECT count(*) FROM project_assignments WHERE hours_per_week IS NULL") > 0);
        assert_eq!(count("SELECT count(*) FROM employees WHERE (status = 'terminated') != (termination_date IS NOT NULL)"), 0);
        assert_eq!(count("SELECT count(*) FROM employees WHERE termination_date <= hire_date"), 0);
        assert_eq!(count("SELECT count(*) FROM (SELECT first_name, last_name FROM employees GROUP BY 1, 2 HAVING count(*) > 1)"), 0);
    }
}
