"""The report: one self-contained HTML page for leadership and auditors, filled from the case
database, with its charts, the evidence facts and one explain page per receiving request."""
