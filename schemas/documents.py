"""The document model: every manual (PDF, HTML, Markdown, text) becomes an ordered list of
blocks, one row each, with lineage. Sections (`schemas.manuals.MANUAL_SECTION_SCHEMA`),
pretraining chunks and the fault-code knowledge base are built from blocks."""

from __future__ import annotations

import polars as pl

from schemas.records import LINEAGE_SCHEMA

BLOCK_KINDS = ("heading", "paragraph", "list_item", "table", "definition", "labelled")

DOCUMENT_BLOCK_SCHEMA: dict[str, pl.DataType] = {
    **LINEAGE_SCHEMA,  # source_kind "manual"; source_row: the block's first line (HTML: of its
    # start tag; PDF: of the document's text as read, paragraphs apart by a blank line, a table
    # its rendered lines, counted over the document)
    "block": pl.Int32(),  # position in the document, from 0
    "kind": pl.String(),  # one of BLOCK_KINDS
    "heading_path": pl.List(pl.String()),  # the headings above it (a heading: its own path)
    "level": pl.Int32(),  # heading level (1 = top, 0 = an HTML <title>); list depth; 0 otherwise
    "text": pl.String(),  # the block as text (a list item with its marker, a labelled item with
    # its label, as written); a table in one stable rendering (a pipe table, see cells)
    # table: its rows, header rows first, merged cells resolved (the value repeated), a table
    # continued on the next page joined; definition: [[term, definition]]; labelled item:
    # [[label, value]] (原因：…, Cause: …); null for the other kinds
    "cells": pl.List(pl.List(pl.String())),
    "header_rows": pl.Int32(),  # table: how many of `cells` are header rows; 0 otherwise
    # the source line of each row of `cells`, counted as source_row is (header rows included;
    # a row joined from wrapped lines: its first line); definition, labelled item: the line of
    # its one row; null for the other kinds
    "row_lines": pl.List(pl.Int64()),
    "page": pl.Int32(),  # PDF page (1-based) where the block starts; null otherwise
}
