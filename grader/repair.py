"""``RepairCells`` (sanitize phase, before ``OverwriteCells``): a graded or read-only cell whose
nbgrader metadata was edited, renamed, stripped or deleted is put back from the gradebook, so
nbgrader's checksums restore its source instead of crashing or leaving a manual-grade hole."""
from nbformat.notebooknode import from_dict
from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor


class RepairCells(NbGraderPreprocessor):
    """Put graded and read-only cells back the way the gradebook knows them.

    A cell without nbgrader metadata whose cell id is a source cell's ``grade_id`` (the self-study
    edition shares the release's cell ids) is taken for that cell, so a self-study copy handed in
    instead of the release is graded without a second copy of every restored cell.

    nbgrader alone crashes on a graded cell whose ``grade_id`` was removed, and never restores a
    deleted read-only cell (the setup cell, a provided cell). Here: metadata of an unknown or
    duplicated ``grade_id`` is dropped (the cell becomes a plain cell), flags and points of a
    known one are reset from the gradebook, and every missing source cell is re-inserted after
    the cell that precedes it in the source notebook. ``OverwriteCells`` then restores sources.
    """

    def preprocess(self, nb, resources):
        notebook_id = resources["nbgrader"]["notebook"]
        assignment_id = resources["nbgrader"]["assignment"]
        with Gradebook(resources["nbgrader"]["db_url"]) as gb:
            source_nb = gb.find_notebook(notebook_id, assignment_id)
            source_cells = list(source_nb.source_cells)
            grade_points = {cell.name: cell.max_score for cell in source_nb.grade_cells}
            solutions = {cell.name for cell in source_nb.solution_cells}
            known = {cell.name: cell for cell in source_cells}
            seen = set()
            tagged = {cell.metadata["nbgrader"].get("grade_id") for cell in nb.cells if "nbgrader" in cell.metadata}
            for cell in nb.cells:
                meta = cell.metadata.get("nbgrader")
                if meta is None and cell.get("id") in known.keys() - tagged:
                    # The self-study copy: same cell ids as the release, no nbgrader metadata on
                    # most cells. Recognised by id, its cells are graded in place, not duplicated.
                    cell.metadata["nbgrader"] = {"grade_id": cell.id, "schema_version": 3, "task": False,
                                                 "cell_type": cell.cell_type}
                    meta = cell.metadata["nbgrader"]  # NotebookNode stores a copy of the dict
                if meta is None:
                    continue
                grade_id = meta.get("grade_id")
                if grade_id not in known or grade_id in seen:
                    del cell.metadata["nbgrader"]
                    continue
                seen.add(grade_id)
                meta["grade"] = grade_id in grade_points
                meta["solution"] = grade_id in solutions
                meta["locked"] = known[grade_id].locked
                if meta["grade"]:
                    meta["points"] = grade_points[grade_id]
                else:
                    meta.pop("points", None)
            position = {cell.metadata.nbgrader["grade_id"]: i
                        for i, cell in enumerate(nb.cells) if "nbgrader" in cell.metadata}
            insert_at = 0
            for source in source_cells:
                if source.name in position:
                    insert_at = position[source.name] + 1
                    continue
                self.log.warning("Cell %s was missing from the submission; restoring it", source.name)
                nb.cells.insert(insert_at, self._cell(source, grade_points, solutions))
                position = {cell.metadata.nbgrader["grade_id"]: i
                            for i, cell in enumerate(nb.cells) if "nbgrader" in cell.metadata}
                insert_at = position[source.name] + 1
        return nb, resources

    @staticmethod
    def _cell(source, grade_points, solutions):
        meta = {"grade": source.name in grade_points, "solution": source.name in solutions,
                "locked": source.locked, "grade_id": source.name, "checksum": source.checksum,
                "schema_version": 3}
        if meta["grade"]:
            meta["points"] = grade_points[source.name]
        cell = {"cell_type": source.cell_type, "source": source.source,
                "metadata": {"nbgrader": meta, "editable": not source.locked, "deletable": False}}
        if source.cell_type == "code":
            cell.update(outputs=[], execution_count=None)
        return from_dict(cell)

    def preprocess_cell(self, cell, resources, index):
        return cell, resources

