"""Writes the change files of this directory: one simulated history of two database tables
(`customers`, `orders`), seeded, as Debezium, Canal and Maxwell would have written it.

Every format gets the same history, so every query over any of them has the same final rows
(and Flink's answers are checked against each). The history has snapshot reads, inserts,
updates of every column (an order moving to another customer among them), deletes, a
customer deleted and inserted again, multi-row Canal statements and Canal DDL events.

Usage: python3 integration-tests/changelog_formats/generate.py   (rewrites the files)
"""

import json
import pathlib
import random

HERE = pathlib.Path(__file__).resolve().parent
REGIONS = ["north", "south", "east", "west"]
STATUSES = ["new", "paid", "shipped", "returned"]


def history(seed=20261203, events=600):
    """Statements of the simulated database, each a list of (table, op, before, after)."""
    rng = random.Random(seed)
    customers = {}
    orders = {}
    statements = []
    # The snapshot: the customers first exist when the capture starts.
    for cid in range(1, 9):
        row = {"id": cid, "name": f"customer-{cid}", "region": rng.choice(REGIONS)}
        customers[cid] = row
        statements.append([("customers", "r", None, dict(row))])
    next_order = 1
    ts = 1_704_067_200_000
    for _ in range(events):
        ts += rng.randint(1, 3000)
        roll = rng.random()
        if roll < 0.06:
            cid = rng.choice(sorted(customers))
            before = dict(customers[cid])
            customers[cid]["region"] = rng.choice(REGIONS)
            statements.append([("customers", "u", before, dict(customers[cid]))])
        elif roll < 0.07 and len(customers) > 5:
            cid = rng.choice(sorted(customers))
            statements.append([("customers", "d", customers.pop(cid), None)])
        elif roll < 0.10:
            gone = [c for c in range(1, 9) if c not in customers]
            if gone:
                cid = rng.choice(gone)
                row = {"id": cid, "name": f"customer-{cid}-again", "region": rng.choice(REGIONS)}
                customers[cid] = row
                statements.append([("customers", "c", None, dict(row))])
        elif roll < 0.55 or len(orders) < 5:
            # One statement inserting one to three orders.
            changes = []
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                row = {
                    "id": next_order,
                    "customer_id": rng.randint(1, 8),
                    "amount": rng.randint(1, 100),
                    "status": "new",
                    "ts": ts,
                }
                next_order += 1
                orders[row["id"]] = row
                changes.append(("orders", "c", None, dict(row)))
            statements.append(changes)
        elif roll < 0.88:
            # One statement updating one or two orders the same way.
            ids = rng.sample(sorted(orders), rng.choice([1, 1, 2]))
            column = rng.choice(["amount", "status", "status", "customer_id"])
            changes = []
            for oid in ids:
                before = dict(orders[oid])
                # Every row of the statement changes the column: Flink reads a column missing
                # from one row's old values but present in another's as NULL (see the README).
                choices = {
                    "amount": range(1, 101),
                    "status": STATUSES,
                    "customer_id": range(1, 9),
                }[column]
                orders[oid][column] = rng.choice([v for v in choices if v != before[column]])
                orders[oid]["ts"] = ts
                changes.append(("orders", "u", before, dict(orders[oid])))
            statements.append(changes)
        else:
            oid = rng.choice(sorted(orders))
            statements.append([("orders", "d", orders.pop(oid), None)])
    return statements


def timestamp(ms):
    """A TIMESTAMP(3) as JSON formats write it by default (SQL standard)."""
    import datetime

    t = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d}"


def image(row):
    if row is None:
        return None
    row = dict(row)
    if "ts" in row:
        row["ts"] = timestamp(row["ts"])
    return row


def debezium(statements, table, schema_include):
    lines = []
    for statement in statements:
        for name, op, before, after in statement:
            if name != table:
                continue
            event = {
                "before": image(before),
                "after": image(after),
                "source": {"db": "shop", "schema": "public", "table": table},
                "op": op,
                "ts_ms": 1_704_067_200_000,
            }
            if schema_include:
                event = {"schema": {"type": "struct", "optional": False}, "payload": event}
            lines.append(json.dumps(event))
    return lines


def canal_value(value):
    """Canal writes every column value as a string."""
    return None if value is None else str(value)


def canal(statements, table):
    kinds = {"c": "INSERT", "r": "INSERT", "u": "UPDATE", "d": "DELETE"}
    lines = [
        json.dumps(
            {"data": None, "old": None, "type": "CREATE", "database": "shop", "table": table,
             "isDdl": True, "sql": f"CREATE TABLE {table} (...)", "es": 0, "ts": 0}
        )
    ]
    for statement in statements:
        changes = [c for c in statement if c[0] == table]
        if not changes:
            continue
        kind = kinds[changes[0][1]]
        data, old = [], []
        for _, op, before, after in changes:
            row = image(after if op in ("c", "r", "u") else before)
            data.append({k: canal_value(v) for k, v in row.items()})
            if op == "u":
                previous = image(before)
                old.append({k: canal_value(previous[k]) for k in row if previous[k] != row[k]})
        lines.append(
            json.dumps(
                {"data": data, "old": old or None, "type": kind, "database": "shop",
                 "table": table, "pkNames": ["id"], "isDdl": False, "es": 0, "ts": 0}
            )
        )
    return lines


def maxwell(statements, table):
    kinds = {"c": "insert", "r": "insert", "u": "update", "d": "delete"}
    lines = []
    for statement in statements:
        for name, op, before, after in statement:
            if name != table:
                continue
            row = image(after if op in ("c", "r", "u") else before)
            message = {"database": "shop", "table": table, "type": kinds[op], "ts": 0,
                       "xid": 1, "commit": True, "data": row}
            if op == "u":
                previous = image(before)
                message["old"] = {k: previous[k] for k in row if previous[k] != row[k]}
            lines.append(json.dumps(message))
    return lines


def main():
    statements = history()
    files = {
        "orders.debezium.json": debezium(statements, "orders", False),
        "customers.debezium.json": debezium(statements, "customers", True),
        "orders.canal.json": canal(statements, "orders"),
        "customers.canal.json": canal(statements, "customers"),
        "orders.maxwell.json": maxwell(statements, "orders"),
    }
    for name, lines in files.items():
        (HERE / name).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
