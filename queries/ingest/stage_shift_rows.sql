-- A part of a large JSON Lines file: number its rows on from the lines of the parts before it.
UPDATE staged_rows SET src_row = src_row + $lines_before;
